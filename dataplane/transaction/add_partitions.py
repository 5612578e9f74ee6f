"""AddPartitionsToTxn and AddOffsetsToTxn (Kafka's handleAddPartitionsToTransaction): the
partitions a transaction writes to join it, so each gets its marker when it ends. The
partition leaders' KIP-890 calls come here too: whether a partition is in the ongoing
transaction (`verify_only`), or, for TV2 producers, its implicit add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane.coordinator.runtime import partition_for
from dataplane.coordinator.timer import wall_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.refusals import illegal_state, log_refused
from dataplane.transaction.state import TransactionState
from dataplane.transaction.state_manager import TransactionStateManager

if TYPE_CHECKING:
    from dataplane.transaction.config import TransactionConfig

S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class AddPartitionsFlow:
    """Adds partitions (a group's offsets partition too) to ongoing transactions."""

    config: TransactionConfig
    state: TransactionStateManager

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
        verify_only: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn (and the partition leaders' KIP-890 calls): an error per
        partition. verify_only answers whether each partition is in the ongoing transaction
        (NONE or TRANSACTION_ABORTABLE, which the leader maps to INVALID_TXN_STATE for clients
        that predate it) without adding it."""
        wanted = list(dict.fromkeys(partitions))

        def every(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return dict.fromkeys(wanted, code)

        if not transactional_id:
            return every(ErrorCode.invalid_request)
        try:
            await self.state.settled(transactional_id)
            shard = self.state.runtime.shard(transactional_id)
        except KafkaError as e:
            return every(e.code)
        meta = shard.get(transactional_id)
        if meta is None:
            return every(ErrorCode.invalid_producer_id_mapping)
        what = "AddPartitionsToTxn" + (" (verification)" if verify_only else "")
        if meta.producer_id != producer_id:
            code = ErrorCode.invalid_producer_id_mapping
            log_refused(
                what, meta, code, producer_id, producer_epoch, f"producer {meta.producer_id}"
            )
            return every(code)
        if meta.producer_epoch != producer_epoch:
            code = ErrorCode.producer_fenced
            log_refused(
                what, meta, code, producer_id, producer_epoch, f"epoch {meta.producer_epoch}"
            )
            return every(code)
        if verify_only:
            # a pending state is not checked: the append validates the epoch again
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return every(ErrorCode.concurrent_transactions)
            return {
                tp: ErrorCode.none if tp in meta.partitions else ErrorCode.transaction_abortable
                for tp in wanted
            }
        if meta.pending_transition_in_progress or meta.state in (
            S.PREPARE_COMMIT,
            S.PREPARE_ABORT,
        ):
            return every(ErrorCode.concurrent_transactions)
        if meta.state == S.ONGOING and meta.partitions.issuperset(wanted):
            return every(ErrorCode.none)
        if meta.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return every(illegal_state(meta, "AddPartitionsToTxn")[0])
        transit = meta.prepare_add_partitions(wanted, wall_ms(), meta.client_transaction_version)
        return every(await self.state.write(shard, meta, transit))

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction
        (its leader gets the marker that makes the transaction's offsets visible)."""
        tp = (OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_partitions))
        result = await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])
        return result[tp]
