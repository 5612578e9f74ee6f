"""The records of `__share_group_state`, byte for byte as Kafka's share coordinator writes them.

Key: int16 record type, then the key's fields at version 0 — type 0 ShareSnapshotKey (the
whole state of a share-partition), type 1 ShareUpdateKey (a delta on the last snapshot). Both
name the share-partition (group id, topic id, partition). Value (None: a tombstone, the state
was deleted): int16 version 0, then ShareSnapshotValue / ShareUpdateValue.

Rafka writes a snapshot on every change (compaction keeps the last one per key); it reads
updates too, applying them to the snapshot the way Kafka does, so a topic Kafka wrote loads.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from dataplane.protocol.message_codec import CorruptRecord, UnknownVersion, record_type
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState, StateBatch
from dataplane.share.state_record_schemas import (
    SHARE_SNAPSHOT_KEY,
    SHARE_SNAPSHOT_VALUE,
    SHARE_UPDATE_KEY,
    SHARE_UPDATE_VALUE,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)

__all__ = [
    "SNAPSHOT",
    "UPDATE",
    "CorruptRecord",
    "ShareRecord",
    "UnknownVersion",
    "apply_update",
    "decode_record",
    "delivery_complete_count",
    "snapshot_key",
    "snapshot_value",
    "state_batches",
    "update_key",
]

_I16 = struct.Struct(">h")
SNAPSHOT = 0  # record type of ShareSnapshotKey/Value
UPDATE = 1  # record type of ShareUpdateKey/Value
_VALUE_VERSION = 0
_KEYS = {SNAPSHOT: SHARE_SNAPSHOT_KEY, UPDATE: SHARE_UPDATE_KEY}
_VALUES = {SNAPSHOT: SHARE_SNAPSHOT_VALUE, UPDATE: SHARE_UPDATE_VALUE}


@dataclass(frozen=True, slots=True)
class ShareRecord:
    """A decoded record; `value` None for a tombstone."""

    record_type: int
    key: SharePartitionKey
    value: ShareSnapshotValue | ShareUpdateValue | None


def snapshot_key(key: SharePartitionKey) -> bytes:
    record = ShareSnapshotKey(key.group_id, key.topic_id.bytes, key.partition)
    return _I16.pack(SNAPSHOT) + SHARE_SNAPSHOT_KEY.encode(record, 0)


def update_key(key: SharePartitionKey) -> bytes:
    record = ShareUpdateKey(key.group_id, key.topic_id.bytes, key.partition)
    return _I16.pack(UPDATE) + SHARE_UPDATE_KEY.encode(record, 0)


def delivery_complete_count(state: ShareState) -> int:
    """Offsets at or past the start offset whose delivery is complete (acknowledged or
    archived): KIP-1226's DeliveryCompleteCount, which lag reports subtract."""
    return sum(
        b.last_offset - max(b.first_offset, state.start_offset) + 1
        for b in state.batches
        if b.delivery_state in (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)
        and b.last_offset >= state.start_offset
    )


def snapshot_value(
    state: ShareState, snapshot_epoch: int, create_timestamp: int, write_timestamp: int
) -> bytes:
    value = ShareSnapshotValue(
        snapshot_epoch=snapshot_epoch,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=delivery_complete_count(state),
        create_timestamp=create_timestamp,
        write_timestamp=write_timestamp,
        state_batches=tuple(
            ShareSnapshotValue.StateBatch(
                b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count
            )
            for b in state.batches
        ),
    )
    return _I16.pack(_VALUE_VERSION) + SHARE_SNAPSHOT_VALUE.encode(value, _VALUE_VERSION)


def decode_record(key: bytes | None, value: bytes | None) -> ShareRecord | None:
    """Decode one record; None for a record type this broker does not know (Kafka skips
    those). Raises CorruptRecord, UnknownVersion (a subclass) for a value version it lacks."""
    kind = record_type(key)
    key_schema = _KEYS.get(kind)
    if key_schema is None:
        return None
    assert key is not None  # record_type raised otherwise
    k, _ = key_schema.decode(key, 0, 2)
    try:
        topic_id = uuid.UUID(bytes=bytes(k.topic_id))
    except ValueError:
        raise CorruptRecord(f"a share state key with topic id {k.topic_id!r}") from None
    share_key = SharePartitionKey(k.group_id, topic_id, k.partition)
    if value is None:
        return ShareRecord(kind, share_key, None)
    if len(value) < 2:
        raise CorruptRecord(f"{share_key.coordinator_key()}: a value of {len(value)} bytes")
    (version,) = _I16.unpack_from(value)
    decoded, _ = _VALUES[kind].decode(value, version, 2)
    return ShareRecord(kind, share_key, decoded)


def state_batches(
    batches: Iterable[ShareSnapshotValue.StateBatch | ShareUpdateValue.StateBatch],
) -> tuple[StateBatch, ...]:
    """A record's batches as the model's. Raises CorruptRecord for an unknown state."""
    out = []
    for b in batches:
        try:
            delivery_state = DeliveryState(b.delivery_state)
        except ValueError:
            raise CorruptRecord(f"unknown delivery state {b.delivery_state}") from None
        out.append(StateBatch(b.first_offset, b.last_offset, delivery_state, b.delivery_count))
    return tuple(out)


def apply_update(state: ShareState, update: ShareUpdateValue) -> ShareState:
    """The state after a ShareUpdate (Kafka's merge): the update's batches replace whatever the
    snapshot had for their offsets, its start offset (-1: unchanged) drops what lies before."""
    start = update.start_offset if update.start_offset >= 0 else state.start_offset
    merged: list[StateBatch] = list(state.batches)
    for new in state_batches(update.state_batches):
        kept: list[StateBatch] = []
        for old in merged:
            if old.last_offset < new.first_offset or old.first_offset > new.last_offset:
                kept.append(old)
                continue
            if old.first_offset < new.first_offset:
                kept.append(_slice(old, old.first_offset, new.first_offset - 1))
            if old.last_offset > new.last_offset:
                kept.append(_slice(old, new.last_offset + 1, old.last_offset))
        kept.append(new)
        merged = kept
    live = [
        _slice(b, max(b.first_offset, start), b.last_offset)
        for b in merged
        if b.last_offset >= start
    ]
    live.sort(key=lambda b: b.first_offset)
    return ShareState(state.state_epoch, update.leader_epoch, start, tuple(live))


def _slice(batch: StateBatch, first: int, last: int) -> StateBatch:
    return StateBatch(first, last, batch.delivery_state, batch.delivery_count)
