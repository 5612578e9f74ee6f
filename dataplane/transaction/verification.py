"""KIP-890 transaction verification from a partition leader (Kafka's AddPartitionsToTxnManager).

Before a leader appends a producer's first transactional batch of a transaction (one the
partition has no open transaction for), it asks the producer's transaction coordinator whether
the partition is in that transaction (part 1, `add=False`) or, for transaction version 2
clients, has the coordinator add it (part 2, `add=True`). A late or hanging write of an ended
transaction is refused instead of opening a transaction nobody will ever end. The coordinator
is the leader of the transactional id's partition of `__transaction_state`: this broker's own
`TransactionCoordinator` when it leads it, otherwise reached through the `AddPartitionsToTxn`
RPC on that broker's replication endpoint. Once the partition has the open transaction, its
state answers the following batches (no cache here).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio
import grpc

from common.grpc_cancellation import rpc
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.peers import PeerChannels
from proto import replication_pb2, replication_pb2_grpc

if TYPE_CHECKING:
    from common.internal_security import InternalSecurity
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.metadata_cache import MetadataCache
    from dataplane.transaction.coordinator import TransactionCoordinator

log = logging.getLogger("rafka.transaction.verification")

_RPC_TIMEOUT_S = 10.0
_RETRY_FOR_S = 1.0  # retriable answers are retried this long, then given to the client
_INITIAL_BACKOFF_S = 0.02
_MAX_BACKOFF_S = 0.25

# The coordinator cannot answer now: retried briefly, then NOT_ENOUGH_REPLICAS, which clients
# retry without a metadata refresh (Kafka's ReplicaManager maps these so).
_RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,  # no answer before the deadline
    }
)


class VerifyTransport(Protocol):
    """Sends an AddPartitionsToTxn call to a broker (gRPC; a fake in tests). Raises KafkaError
    or grpc.aio.AioRpcError when the call itself fails."""

    async def add_partitions_to_txn(
        self, broker_id: int, request: replication_pb2.AddPartitionsToTxnRequest
    ) -> replication_pb2.AddPartitionsToTxnResponse: ...


class GrpcVerifyTransport:
    def __init__(self, peers: PeerChannels) -> None:
        self._peers = peers

    async def add_partitions_to_txn(
        self, broker_id: int, request: replication_pb2.AddPartitionsToTxnRequest
    ) -> replication_pb2.AddPartitionsToTxnResponse:
        stub = self._peers.stub(broker_id, replication_pb2_grpc.TransactionsStub)
        response: replication_pb2.AddPartitionsToTxnResponse = await rpc(
            stub.AddPartitionsToTxn(request, timeout=_RPC_TIMEOUT_S)
        )
        return response


class TxnVerifier:
    def __init__(
        self,
        node_id: int,
        cache: MetadataCache,
        security: InternalSecurity,
        transactions_topic: InternalTopic,
        *,
        transport: VerifyTransport | None = None,
    ) -> None:
        """`transport` replaces the gRPC calls (tests)."""
        self._node_id = node_id
        self._cache = cache
        self._topic = transactions_topic
        self._peers = PeerChannels(cache, security)
        self._transport = transport or GrpcVerifyTransport(self._peers)
        self._coordinator: TransactionCoordinator | None = None

    def set_coordinator(self, coordinator: TransactionCoordinator) -> None:
        """This broker's transaction coordinator (built after the verifier)."""
        self._coordinator = coordinator

    async def close(self) -> None:
        await self._peers.close()

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topic: str,
        partition: int,
        add: bool,
    ) -> ErrorCode:
        """NONE when the partition is (now, with `add`) in the producer's ongoing transaction;
        else the error for the produce: TRANSACTION_ABORTABLE (not in it; callers of old
        versions map it to INVALID_TXN_STATE), INVALID_PRODUCER_EPOCH (fenced; PRODUCER_FENCED
        is answered so, as Kafka does), NOT_ENOUGH_REPLICAS (the coordinator could not answer
        in time), or the coordinator's other errors."""
        request = replication_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            topic=topic,
            partition=partition,
            add=add,
            leader_id=self._node_id,
        )
        backoff = _INITIAL_BACKOFF_S
        code = ErrorCode.request_timed_out  # if the deadline passes before any answer
        with anyio.move_on_after(_RETRY_FOR_S):
            while True:
                code = await self._ask(request)
                if code not in _RETRIABLE:
                    break
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
        if code in _RETRIABLE:
            log.info(
                "cannot verify that %s-%d is in the transaction of %r (producer %d, epoch %d): "
                "its coordinator %s; the producer retries",
                topic,
                partition,
                transactional_id,
                producer_id,
                producer_epoch,
                f"did not answer within {_RETRY_FOR_S:g} s"
                if code == ErrorCode.request_timed_out
                else f"answers {code.name.upper()}",
            )
            return ErrorCode.not_enough_replicas
        if code != ErrorCode.none:
            log.info(
                "refused a transactional write to %s-%d by %r (producer %d, epoch %d): its "
                "coordinator answers %s (the coordinator's log says why)",
                topic,
                partition,
                transactional_id,
                producer_id,
                producer_epoch,
                code.name.upper(),
            )
        return ErrorCode.invalid_producer_epoch if code == ErrorCode.producer_fenced else code

    async def _ask(self, request: replication_pb2.AddPartitionsToTxnRequest) -> ErrorCode:
        """One question to the coordinator of the transactional id."""
        info = self._cache.topics.get(self._topic.name)
        if info is None:
            return ErrorCode.coordinator_not_available
        index = self._topic.partition_for(request.transactional_id)
        leader = info.partitions[index].leader if index < len(info.partitions) else -1
        if leader < 0:
            return ErrorCode.coordinator_not_available
        if leader == self._node_id:
            if self._coordinator is None:
                return ErrorCode.coordinator_not_available
            tp = (request.topic, request.partition)
            errors = await self._coordinator.add_partitions(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                [tp],
                verify_only=not request.add,
            )
            return errors.get(tp, ErrorCode.unknown_server_error)
        try:
            response = await self._transport.add_partitions_to_txn(leader, request)
        except KafkaError as e:
            return (
                ErrorCode.network_exception if e.code == ErrorCode.broker_not_available else e.code
            )
        except grpc.aio.AioRpcError as e:
            level = logging.WARNING if e.code() == grpc.StatusCode.UNAUTHENTICATED else logging.INFO
            log.log(
                level,
                "AddPartitionsToTxn to broker %d failed: %s (%s)",
                leader,
                e.code().name,
                e.details(),
            )
            return ErrorCode.network_exception
        return ErrorCode(response.error_code)
