"""`__share_group_state` records: Kafka's byte layout (record type, then the fields), the
snapshot round trip, and how a ShareUpdate delta applies to a snapshot."""

from __future__ import annotations

import struct
import uuid

import pytest

from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState, StateBatch
from dataplane.share.state_record_schemas import (
    SHARE_UPDATE_VALUE,
    ShareSnapshotValue,
    ShareUpdateValue,
)
from dataplane.share.state_records import (
    SNAPSHOT,
    UPDATE,
    CorruptRecord,
    apply_update,
    decode_record,
    delivery_complete_count,
    snapshot_key,
    snapshot_value,
    update_key,
)

A, ACK, ARC = DeliveryState.AVAILABLE, DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED
KEY = SharePartitionKey("g", uuid.UUID(int=7), 3)


def test_snapshot_key_is_kafkas_layout() -> None:
    raw = snapshot_key(KEY)
    # int16 record type 0, string group id, uuid, int32 partition
    assert raw == struct.pack(">hh", 0, 1) + b"g" + uuid.UUID(int=7).bytes + struct.pack(">i", 3)
    assert update_key(KEY)[:2] == struct.pack(">h", 1)


def test_snapshot_round_trip() -> None:
    state = ShareState(2, 5, 100, (StateBatch(100, 104, ACK, 1), StateBatch(107, 107, A, 3)))
    record = decode_record(snapshot_key(KEY), snapshot_value(state, 4, 1000, 2000))
    assert record is not None
    assert record.record_type == SNAPSHOT
    assert record.key == KEY
    value = record.value
    assert isinstance(value, ShareSnapshotValue)
    assert (value.snapshot_epoch, value.state_epoch, value.leader_epoch) == (4, 2, 5)
    assert (value.create_timestamp, value.write_timestamp) == (1000, 2000)
    assert value.delivery_complete_count == 5
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in value.state_batches] == [
        (100, 104, 2),
        (107, 107, 0),
    ]


def test_tombstone_and_unknown_types() -> None:
    record = decode_record(snapshot_key(KEY), None)
    assert record is not None
    assert record.value is None
    assert record.key == KEY
    assert decode_record(struct.pack(">h", 9) + b"junk", b"") is None
    with pytest.raises(CorruptRecord):
        decode_record(b"\x00", None)
    with pytest.raises(CorruptRecord):
        decode_record(snapshot_key(KEY), b"\x00")


def test_delivery_complete_count_counts_from_the_start_offset() -> None:
    state = ShareState(0, 0, 10, (StateBatch(5, 12, ARC, 5), StateBatch(13, 14, A, 1)))
    assert delivery_complete_count(state) == 3  # 10, 11, 12


def _update(start: int, *batches: tuple[int, int, int, int]) -> ShareUpdateValue:
    """A ShareUpdate record's value as replay decodes it."""
    value = ShareUpdateValue(
        snapshot_epoch=1,
        leader_epoch=9,
        start_offset=start,
        state_batches=tuple(ShareUpdateValue.StateBatch(*b) for b in batches),
    )
    record = decode_record(
        update_key(KEY), struct.pack(">h", 0) + SHARE_UPDATE_VALUE.encode(value, 0)
    )
    assert record is not None
    assert record.record_type == UPDATE
    assert isinstance(record.value, ShareUpdateValue)
    return record.value


def test_update_overlays_and_trims() -> None:
    state = ShareState(3, 1, 0, (StateBatch(0, 9, A, 1),))
    updated = apply_update(state, _update(-1, (3, 5, 2, 1)))
    assert updated == ShareState(
        3, 9, 0, (StateBatch(0, 2, A, 1), StateBatch(3, 5, ACK, 1), StateBatch(6, 9, A, 1))
    )
    # a new start offset drops what lies before it, cutting a batch that straddles it
    moved = apply_update(updated, _update(4, (8, 8, 4, 2)))
    assert moved.start_offset == 4
    assert moved.batches == (
        StateBatch(4, 5, ACK, 1),
        StateBatch(6, 7, A, 1),
        StateBatch(8, 8, ARC, 2),
        StateBatch(9, 9, A, 1),
    )
