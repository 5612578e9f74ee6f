"""The transaction coordinator's settings (Kafka's TransactionConfig), from the broker's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane.transaction.state import TV_2

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The coordinator's settings (Kafka's TransactionConfig)."""

    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    # transaction.version until the meta service has finalized feature levels (the broker
    # setting; see `TransactionStateManager.transaction_version`)
    transaction_version: int = TV_2
    offsets_topic_partitions: int = 50  # where AddOffsetsToTxn finds a group's partition


def transaction_config(config: BrokerConfig) -> TransactionConfig:
    return TransactionConfig(
        max_timeout_ms=config.transaction_max_timeout_ms,
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        abort_timed_out_interval_ms=(
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
        remove_expired_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        transaction_version=config.transaction_version,
        offsets_topic_partitions=config.offsets_topic_num_partitions,
    )
