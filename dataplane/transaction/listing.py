"""DescribeTransactions and ListTransactions (Kafka's handleDescribeTransactions and
listTransactionStates): read-only views of the transactional ids this broker coordinates, as
kafka-transactions.sh and `rafka transactions` show them.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass

from dataplane.coordinator.timer import wall_ms
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.state import (
    ListedTransaction,
    TransactionDescription,
    TransactionState,
)
from dataplane.transaction.state_manager import TransactionStateManager

S = TransactionState


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """Answers what the admin APIs ask about transactional ids."""

    state: TransactionStateManager

    async def describe(
        self, transactional_ids: Iterable[str]
    ) -> builtins.list[TransactionDescription]:
        return [self._describe(transactional_id) for transactional_id in transactional_ids]

    def _describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(transactional_id, ErrorCode.invalid_request)
        try:
            meta = self.state.runtime.shard(transactional_id).get(transactional_id)
        except KafkaError as e:
            return TransactionDescription(transactional_id, e.code)
        if meta is None or meta.state == S.DEAD:
            return TransactionDescription(transactional_id, ErrorCode.transactional_id_not_found)
        by_topic: dict[str, builtins.list[int]] = {}
        for topic, index in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(index)
        return TransactionDescription(
            transactional_id,
            ErrorCode.none,
            state=meta.state.kafka_name,
            timeout_ms=meta.txn_timeout_ms,
            start_time_ms=meta.txn_start_timestamp,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            partitions=tuple((t, tuple(ps)) for t, ps in by_topic.items()),
        )

    async def list(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        pattern: str | None = None,
    ) -> builtins.list[ListedTransaction]:
        """The ids this broker coordinates, filtered as ListTransactions asks: state names (as
        DescribeTransactions shows them), producer ids, open longer than duration_filter_ms
        (when >= 0), a regular expression the whole id matches (re.error if it is invalid)."""
        state_names = set(states)
        pids = set(producer_ids)
        regex = re.compile(pattern) if pattern else None
        now = wall_ms()
        out = []
        for shard in self.state.runtime.loaded_shards():
            for meta in shard.transactions.values():
                if (
                    meta.state == S.DEAD
                    or (pids and meta.producer_id not in pids)
                    or (state_names and meta.state.kafka_name not in state_names)
                    or (
                        duration_filter_ms >= 0
                        and now - meta.txn_start_timestamp <= duration_filter_ms
                    )
                    or (regex is not None and not regex.fullmatch(meta.transactional_id))
                ):
                    continue
                out.append(
                    ListedTransaction(
                        meta.transactional_id, meta.producer_id, meta.state.kafka_name
                    )
                )
        return out

    def is_loading(self) -> bool:
        """Whether a partition this broker leads is still loading (ListTransactions answers
        COORDINATOR_LOAD_IN_PROGRESS then)."""
        return self.state.runtime.is_loading()
