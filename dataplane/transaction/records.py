"""The records of `__transaction_state`, byte for byte as Kafka writes them.

Key: int16 version 0, then TransactionLogKey (the transactional id). Value (None: a tombstone,
the id expired): int16 version, then TransactionLogValue — v0 until transaction.version 1,
then v1 (flexible, with PreviousProducerId, NextProducerId and ClientTransactionVersion as
tagged fields). The partitions are grouped by topic and null in the Empty state.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from dataplane.protocol.message_codec import CorruptRecord, UnknownVersion, record_type
from dataplane.transaction.record_schemas import (
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    TransactionLogKey,
    TransactionLogValue,
)
from dataplane.transaction.state import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    log_value_version,
)

__all__ = [
    "KEY_VERSION",
    "CorruptRecord",
    "UnknownVersion",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

_I16 = struct.Struct(">h")
KEY_VERSION = 0


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + TRANSACTION_LOG_KEY.encode(
        TransactionLogKey(transactional_id), KEY_VERSION
    )


def encode_value(t: TxnTransitMetadata, transaction_version: int) -> bytes:
    """The value of a transition, at the version the coordinator's feature level writes."""
    if t.state == TransactionState.EMPTY and t.partitions:
        raise ValueError(f"an Empty transaction has no partitions: {t}")
    partitions: tuple[TransactionLogValue.PartitionsSchema, ...] | None = None
    if t.state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in t.partitions:
            by_topic[topic].append(index)
        partitions = tuple(
            TransactionLogValue.PartitionsSchema(topic, tuple(sorted(indexes)))
            for topic, indexes in sorted(by_topic.items())
        )
    value = TransactionLogValue(
        producer_id=t.producer_id,
        previous_producer_id=t.prev_producer_id,
        next_producer_id=t.next_producer_id,
        producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms,
        transaction_status=int(t.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
        transaction_start_timestamp_ms=t.txn_start_timestamp,
        client_transaction_version=t.client_transaction_version,
    )
    version = log_value_version(transaction_version)
    return _I16.pack(version) + TRANSACTION_LOG_VALUE.encode(value, version)


def decode_key(key: bytes | None) -> str | None:
    """The transactional id of a record key; None for a key version this broker does not know
    (Kafka skips those: leftovers of an aborted upgrade). Raises CorruptRecord."""
    version = record_type(key)
    if version != KEY_VERSION:
        return None
    assert key is not None  # record_type raised otherwise
    decoded, _ = TRANSACTION_LOG_KEY.decode(key, version, 2)
    return str(decoded.transactional_id)


def decode_value(transactional_id: str, value: bytes | None) -> TransactionMetadata | None:
    """The metadata a value holds (None for a tombstone). Raises CorruptRecord, UnknownVersion."""
    if value is None:
        return None
    if len(value) < 2:
        raise CorruptRecord(f"{transactional_id}: a transaction log value of {len(value)} bytes")
    (version,) = _I16.unpack_from(value)
    v, _ = TRANSACTION_LOG_VALUE.decode(value, version, 2)
    try:
        state = TransactionState(v.transaction_status)
    except ValueError:
        raise CorruptRecord(
            f"{transactional_id}: unknown transaction state {v.transaction_status}"
        ) from None
    metadata = TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=v.producer_id,
        previous_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        producer_epoch=v.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=v.transaction_timeout_ms,
        state=state,
        txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version,
    )
    if state != TransactionState.EMPTY:
        for entry in v.transaction_partitions or ():
            metadata.partitions.update((entry.topic, p) for p in entry.partition_ids)
    return metadata
