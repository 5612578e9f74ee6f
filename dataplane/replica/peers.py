"""gRPC channels to the other brokers' replication endpoints, for the broker-to-broker RPCs
served there beside replication (proto/replication.proto: `Transactions`, `ShareState`): one
channel per broker, opened on first use with the cluster's internal credentials (as the replica
fetchers open theirs) and replaced when the broker's endpoint changes; a stub per service on
it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica import wire

if TYPE_CHECKING:
    import grpc

    from common.internal_security import InternalSecurity
    from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.replication.peers")

StubT = TypeVar("StubT")


class PeerChannels:
    """Stubs per broker id and service, on channels kept open between calls."""

    def __init__(self, cache: MetadataCache, security: InternalSecurity) -> None:
        self._cache = cache
        self._security = security
        # broker id -> (endpoint, channel, stubs by stub class)
        self._peers: dict[int, tuple[str, grpc.aio.Channel, dict[Callable[..., Any], Any]]] = {}

    def stub(self, broker_id: int, stub_type: Callable[[grpc.aio.Channel], StubT]) -> StubT:
        """The `stub_type` (a generated *Stub class) for `broker_id`; KafkaError
        BROKER_NOT_AVAILABLE when the broker is unknown, fenced or has no replication endpoint
        (callers retry once metadata changes)."""
        info = self._cache.brokers.get(broker_id)
        if info is None or info.fenced or not info.replication_endpoint:
            raise KafkaError(ErrorCode.broker_not_available, f"broker {broker_id} is not available")
        current = self._peers.get(broker_id)
        if current is None or current[0] != info.replication_endpoint:
            # a moved broker: calls in flight on the old channel end on their own, and gRPC
            # closes it once it is collected
            channel = self._security.channel(info.replication_endpoint, wire.OPTIONS)
            current = self._peers[broker_id] = (info.replication_endpoint, channel, {})
        stubs = current[2]
        stub = stubs.get(stub_type)
        if stub is None:
            stub = stubs[stub_type] = stub_type(current[1])
        result: StubT = stub
        return result

    async def close(self) -> None:
        peers, self._peers = self._peers, {}
        for _, channel, _ in peers.values():
            try:
                await channel.close()
            except Exception:  # closing is best effort at shutdown
                log.debug("closing a channel to a broker failed", exc_info=True)
