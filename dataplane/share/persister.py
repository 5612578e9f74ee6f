"""The `Persister` share-partition leaders and the group coordinator use (Kafka's
DefaultStatePersister): each call goes to the share coordinator of its share-partition — the
leader of the key's `__share_group_state` partition — directly when that is this broker, else
through the `ShareState` RPC on that broker's replication port.

While the coordinator moves or loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, an unreachable broker) a call is retried until its deadline, waiting
for the next metadata change (a new leader) or a short backoff, whichever comes first; then it
raises KafkaError with what failed last and logs what to look at.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio
import grpc

from common.grpc_cancellation import rpc
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.model import SharePartitionKey, ShareState
from dataplane.share.state_coordinator import NO_LEADER_EPOCH
from dataplane.share.state_rpc import key_to_proto, state_from_response, state_to_proto
from proto import replication_pb2, replication_pb2_grpc

if TYPE_CHECKING:
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.peers import PeerChannels
    from dataplane.share.state_coordinator import ShareCoordinator

__all__ = ["NO_LEADER_EPOCH", "SharePersister"]

log = logging.getLogger("rafka.share.persister")

T = TypeVar("T")
Stub = replication_pb2_grpc.ShareStateStub
Response = replication_pb2.ShareStateResponse

DEFAULT_TIMEOUT_S = 30.0
_INITIAL_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0
RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.broker_not_available,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
    }
)
"""The coordinator cannot answer now, another (or the same, later) will."""

_FATAL_RPC = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class SharePersister:
    """The share coordinator wherever it runs (see module); implements `Persister`."""

    def __init__(
        self,
        node_id: int,
        cache: MetadataCache,
        topic: InternalTopic,
        peers: PeerChannels,
        local: ShareCoordinator | None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        """`topic`: `__share_group_state` (places the keys, created on first use); `local`:
        this broker's share coordinator (None: a process that coordinates nothing, as a tool);
        `timeout_s`: how long a call keeps retrying."""
        self._node_id = node_id
        self._cache = cache
        self._topic = topic
        self._peers = peers
        self._local = local
        self._timeout_s = timeout_s

    def _coordinator(self) -> ShareCoordinator:
        """This broker's coordinator, which `_call` uses only when this broker is the
        coordinator of the key (so it exists)."""
        if self._local is None:
            raise KafkaError(ErrorCode.not_coordinator, f"node {self._node_id} coordinates nothing")
        return self._local

    async def close(self) -> None:
        await self._peers.close()

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        request = replication_pb2.ReadShareStateRequest(
            key=key_to_proto(key), leader_epoch=leader_epoch
        )
        return await self._call(
            key,
            "read",
            lambda: self._coordinator().read(key, leader_epoch),
            lambda stub, timeout: stub.Read(request, timeout=timeout),
            state_from_response,
        )

    async def write(self, key: SharePartitionKey, state: ShareState) -> None:
        request = replication_pb2.WriteShareStateRequest(
            key=key_to_proto(key), state=state_to_proto(state)
        )
        await self._call(
            key,
            "write",
            lambda: self._coordinator().write(key, state),
            lambda stub, timeout: stub.Write(request, timeout=timeout),
            state_from_response,
        )

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> ShareState:
        request = replication_pb2.InitializeShareStateRequest(
            key=key_to_proto(key), start_offset=start_offset
        )
        return await self._call(
            key,
            "initialize",
            lambda: self._coordinator().initialize(key, start_offset),
            lambda stub, timeout: stub.Initialize(request, timeout=timeout),
            _initialized,
        )

    async def delete(self, key: SharePartitionKey) -> None:
        request = replication_pb2.ShareStateKeyRequest(key=key_to_proto(key))
        await self._call(
            key,
            "delete",
            lambda: self._coordinator().delete(key),
            lambda stub, timeout: stub.Delete(request, timeout=timeout),
            state_from_response,
        )

    async def summary(self, key: SharePartitionKey) -> ShareState | None:
        request = replication_pb2.ShareStateKeyRequest(key=key_to_proto(key))
        return await self._call(
            key,
            "summary",
            lambda: self._coordinator().summary(key),
            lambda stub, timeout: stub.Summary(request, timeout=timeout),
            state_from_response,
        )

    # -- routing and retries ------------------------------------------------------------------

    async def _call(
        self,
        key: SharePartitionKey,
        operation: str,
        local: Callable[[], Awaitable[T]],
        remote: Callable[[Stub, float], Awaitable[Response]],
        answer: Callable[[Response], T],
    ) -> T:
        ck = key.coordinator_key()
        deadline = anyio.current_time() + self._timeout_s
        backoff = _INITIAL_BACKOFF_S
        attempt = 0
        while True:
            attempt += 1
            seen = self._cache.offset
            coordinator = -1
            try:
                coordinator = await self._topic.coordinator(ck)
                if coordinator == self._node_id:
                    return await local()
                stub = self._peers.stub(coordinator, Stub)
                remaining = max(0.001, deadline - anyio.current_time())
                return answer(await rpc(remote(stub, remaining)))
            except KafkaError as e:
                error = e
            except grpc.aio.AioRpcError as e:
                if e.code() in _FATAL_RPC:
                    log.warning(
                        "share state %s of %s: broker %d refused the call (%s: %s); every "
                        "broker needs the same internal.* credentials",
                        operation,
                        ck,
                        coordinator,
                        e.code().name,
                        e.details(),
                    )
                    raise KafkaError(ErrorCode.cluster_authorization_failed, e.details()) from e
                error = KafkaError(
                    ErrorCode.network_exception,
                    f"broker {coordinator}: {e.code().name} {e.details() or ''}".rstrip(),
                )
            if error.code not in RETRIABLE:
                raise error
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise self._gave_up(key, operation, coordinator, attempt, error)
            log.debug(
                "share state %s of %s, attempt %d: %s; retrying", operation, ck, attempt, error
            )
            # a new leader of the partition shows as a metadata change; else back off
            await self._cache.wait_until(self._changed_since(seen), min(backoff, remaining))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def _changed_since(self, offset: int) -> Callable[[], bool]:
        return lambda: self._cache.offset != offset

    def _gave_up(
        self,
        key: SharePartitionKey,
        operation: str,
        coordinator: int,
        attempts: int,
        error: KafkaError,
    ) -> KafkaError:
        partition = self._topic.partition_for(key.coordinator_key())
        where = f"broker {coordinator}" if coordinator >= 0 else "no live leader"
        message = (
            f"share state {operation} of {key.coordinator_key()} failed after "
            f"{self._timeout_s:.0f}s ({attempts} attempts): {error}; its coordinator is the "
            f"leader of {self._topic.name}-{partition} ({where})"
        )
        log.warning(
            "%s — check that partition's leader and ISR (rafka topics describe %s) against "
            "share.coordinator.state.topic.min.isr",
            message,
            self._topic.name,
        )
        return KafkaError(error.code, message)


def _initialized(response: Response) -> ShareState:
    state = state_from_response(response)
    if state is None:  # a coordinator always answers an initialisation with its state
        raise KafkaError(ErrorCode.unknown_server_error, "initialize answered no state")
    return state
