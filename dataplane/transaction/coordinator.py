"""The transaction coordinator (Kafka's TransactionCoordinator): transactional ids on the
leaders of `__transaction_state`'s partitions. `TransactionCoordinator` is what the handlers
and the partition leaders call; it wires the flows, a module each (listed in the package
docstring): InitProducerId, AddPartitionsToTxn/AddOffsetsToTxn, EndTxn (then its completion:
the markers and Complete*), Describe/ListTransactions, and in the background the aborts of
timed-out transactions and the removal of expired ids — all on the shards and writes of the
`TransactionStateManager`. Client errors come back as Kafka error codes; nothing here raises
for them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dataplane.transaction.add_partitions import AddPartitionsFlow
from dataplane.transaction.completion import Completions, MarkerWriter
from dataplane.transaction.end_txn import EndTxnFlow, ProducerIds
from dataplane.transaction.expiry import Expiry
from dataplane.transaction.init_producer_id import InitProducerIdFlow
from dataplane.transaction.listing import TransactionListing
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state_manager import TransactionStateManager

if TYPE_CHECKING:
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.manager import ReplicaManager
    from dataplane.transaction.config import TransactionConfig

log = logging.getLogger("rafka.transaction")


class TransactionCoordinator:
    """This broker's transaction coordinator: the APIs of its flows, and the shards' events."""

    def __init__(
        self,
        config: TransactionConfig,
        cache: MetadataCache,
        replicas: ReplicaManager,
        topic: InternalTopic,
        producer_ids: ProducerIds,
        markers: MarkerWriter,
    ) -> None:
        self._config = config
        self.state = TransactionStateManager(config, cache, replicas, topic, self)
        self._completions = Completions(self.state, markers)
        ending = EndTxnFlow(self.state, producer_ids, self._completions)
        adding = AddPartitionsFlow(config, self.state)
        listing = TransactionListing(self.state)
        self.expiry = Expiry(config, self.state, producer_ids, ending)
        # the APIs, each answered by its flow
        self.init_producer_id = InitProducerIdFlow(
            config, self.state, producer_ids, ending
        ).init_producer_id
        self.add_partitions = adding.add_partitions
        self.add_offsets = adding.add_offsets
        self.end_txn = ending.end_txn
        self.describe = listing.describe
        self.list = listing.list
        self.is_loading = listing.is_loading

    async def run(self) -> None:
        """Serve the shards (the runtime), the completions, and at their intervals the aborts
        of timed-out transactions and the removal of expired ids."""
        await self.state.run(
            (self._config.abort_timed_out_interval_ms, self.expiry.abort_timed_out),
            (self._config.remove_expired_interval_ms, self.expiry.remove_expired),
        )

    # -- the shards' events (ShardListener) ---------------------------------------------------

    def shard_loaded(self, shard: TransactionShard) -> None:
        """Resume every transaction the previous leader left in Prepare*."""
        self._completions.resume(shard)

    def shard_unloaded(self, shard: TransactionShard) -> None:
        self.state.transition_ended()  # parked requests answer NOT_COORDINATOR now
        log.info(
            "%s-%d: no longer coordinating its transactions",
            self.state.topic.name,
            shard.partition_index,
        )
