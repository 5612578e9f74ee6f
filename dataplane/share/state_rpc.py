"""The `ShareState` RPCs (proto/replication.proto): the share coordinator's side, served on the
replication port behind the cluster's internal credentials, and the conversions between the
share model and the messages that both sides (this servicer, the persister's calls) use."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import grpc

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState, StateBatch
from proto import replication_pb2, replication_pb2_grpc

if TYPE_CHECKING:
    from dataplane.share.state_coordinator import ShareCoordinator

log = logging.getLogger("rafka.share.coordinator")


# ---------------------------------------------------------------- conversions


def key_to_proto(key: SharePartitionKey) -> replication_pb2.SharePartition:
    return replication_pb2.SharePartition(
        group_id=key.group_id, topic_id=key.topic_id.bytes, partition=key.partition
    )


def key_from_proto(key: replication_pb2.SharePartition) -> SharePartitionKey:
    """Raises KafkaError INVALID_REQUEST for a topic id that is not 16 bytes."""
    try:
        topic_id = uuid.UUID(bytes=bytes(key.topic_id))
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, "a topic id is 16 bytes") from None
    return SharePartitionKey(key.group_id, topic_id, key.partition)


def state_to_proto(state: ShareState) -> replication_pb2.ShareStateData:
    return replication_pb2.ShareStateData(
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        batches=[
            replication_pb2.ShareStateBatch(
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=int(b.delivery_state),
                delivery_count=b.delivery_count,
            )
            for b in state.batches
        ],
    )


def state_from_proto(data: replication_pb2.ShareStateData) -> ShareState:
    """Raises KafkaError INVALID_REQUEST for an unknown delivery state."""
    batches = []
    for b in data.batches:
        try:
            delivery_state = DeliveryState(b.delivery_state)
        except ValueError:
            raise KafkaError(
                ErrorCode.invalid_request, f"unknown delivery state {b.delivery_state}"
            ) from None
        batches.append(StateBatch(b.first_offset, b.last_offset, delivery_state, b.delivery_count))
    return ShareState(data.state_epoch, data.leader_epoch, data.start_offset, tuple(batches))


def state_from_response(response: replication_pb2.ShareStateResponse) -> ShareState | None:
    """The state a successful answer carries (None: not found); KafkaError for an error."""
    if response.error_code != ErrorCode.none:
        raise KafkaError(response.error_code, response.error_message or None)
    return state_from_proto(response.state) if response.found else None


# ---------------------------------------------------------------- the servicer


class ShareStateRpcHandlers(replication_pb2_grpc.ShareStateServicer):
    """Answers other brokers' persister calls with this broker's share coordinator (which
    answers NOT_COORDINATOR for keys it does not coordinate: the caller looks again)."""

    def __init__(self, coordinator: ShareCoordinator) -> None:
        self._coordinator = coordinator

    async def Read(
        self, request: replication_pb2.ReadShareStateRequest, context: grpc.aio.ServicerContext
    ) -> replication_pb2.ShareStateResponse:
        return await _answer(
            lambda key: self._coordinator.read(key, request.leader_epoch), request.key
        )

    async def Write(
        self, request: replication_pb2.WriteShareStateRequest, context: grpc.aio.ServicerContext
    ) -> replication_pb2.ShareStateResponse:
        async def write(key: SharePartitionKey) -> None:
            await self._coordinator.write(key, state_from_proto(request.state))

        return await _answer(write, request.key)

    async def Initialize(
        self,
        request: replication_pb2.InitializeShareStateRequest,
        context: grpc.aio.ServicerContext,
    ) -> replication_pb2.ShareStateResponse:
        return await _answer(
            lambda key: self._coordinator.initialize(key, request.start_offset), request.key
        )

    async def Delete(
        self, request: replication_pb2.ShareStateKeyRequest, context: grpc.aio.ServicerContext
    ) -> replication_pb2.ShareStateResponse:
        return await _answer(self._coordinator.delete, request.key)

    async def Summary(
        self, request: replication_pb2.ShareStateKeyRequest, context: grpc.aio.ServicerContext
    ) -> replication_pb2.ShareStateResponse:
        return await _answer(self._coordinator.summary, request.key)


async def _answer(
    operation: Callable[[SharePartitionKey], Awaitable[ShareState | None]],
    key: replication_pb2.SharePartition,
) -> replication_pb2.ShareStateResponse:
    """Run the operation; its state or its Kafka error as the answer."""
    try:
        state = await operation(key_from_proto(key))
    except KafkaError as e:
        return replication_pb2.ShareStateResponse(error_code=e.code, error_message=e.message or "")
    except Exception:
        log.exception("a ShareState call for %s/%s failed", key.group_id, key.partition)
        return replication_pb2.ShareStateResponse(error_code=ErrorCode.unknown_server_error)
    if state is None:
        return replication_pb2.ShareStateResponse()
    return replication_pb2.ShareStateResponse(found=True, state=state_to_proto(state))
