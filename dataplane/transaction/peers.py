"""gRPC channels to the other brokers' replication endpoints, for the transaction RPCs
(`Transactions` in proto/replication.proto): one channel per broker, opened on first use with
the cluster's internal credentials (as the replica fetchers open theirs) and replaced when the
broker's endpoint changes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica import wire
from proto import replication_pb2_grpc

if TYPE_CHECKING:
    import grpc

    from cluster.internal_security import InternalSecurity
    from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.transaction")


class PeerChannels:
    """`Transactions` stubs per broker id, on channels kept open between calls."""

    def __init__(self, cache: MetadataCache, security: InternalSecurity) -> None:
        self._cache = cache
        self._security = security
        # broker id -> (endpoint, channel, stub)
        self._peers: dict[
            int, tuple[str, grpc.aio.Channel, replication_pb2_grpc.TransactionsStub]
        ] = {}

    def stub(self, broker_id: int) -> replication_pb2_grpc.TransactionsStub:
        """The stub for `broker_id`; KafkaError BROKER_NOT_AVAILABLE when the broker is
        unknown, fenced or has no replication endpoint (callers retry once metadata changes)."""
        info = self._cache.brokers.get(broker_id)
        if info is None or info.fenced or not info.replication_endpoint:
            raise KafkaError(ErrorCode.broker_not_available, f"broker {broker_id} is not available")
        current = self._peers.get(broker_id)
        if current is not None and current[0] == info.replication_endpoint:
            return current[2]
        # a moved broker: calls in flight on the old channel end on their own, and gRPC
        # closes it once it is collected
        channel = self._security.channel(info.replication_endpoint, wire.OPTIONS)
        stub = replication_pb2_grpc.TransactionsStub(channel)
        self._peers[broker_id] = (info.replication_endpoint, channel, stub)
        return stub

    async def close(self) -> None:
        peers, self._peers = self._peers, {}
        for _, channel, _ in peers.values():
            try:
                await channel.close()
            except Exception:  # closing is best effort at shutdown
                log.debug("closing a transaction channel failed", exc_info=True)
