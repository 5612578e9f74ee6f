"""Transaction markers: Kafka's EndTransactionMarker bytes, built and read back."""

from __future__ import annotations

import struct

import pytest

from dataplane.log import validate
from dataplane.log.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from dataplane.log.control import (
    ABORT,
    COMMIT,
    InvalidMarkerError,
    build_marker_batch,
    read_marker,
)
from dataplane.log.records import decode_records
from tests.unit.log.batches import make_batch


@pytest.mark.parametrize("commit", [True, False])
def test_marker_round_trip(commit: bool) -> None:
    batch = build_marker_batch(42, 3, commit, 17, 1_234)
    (info,) = validate(batch, None, from_client=False)  # a well-formed batch, CRC included
    assert info.attributes == ATTR_TRANSACTIONAL | ATTR_CONTROL
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (42, 3, -1)
    assert (info.base_offset, info.record_count, info.max_timestamp) == (0, 1, 1_234)
    assert read_marker(batch) == (commit, 17)
    assert read_marker(memoryview(batch)) == (commit, 17)


def test_marker_bytes_are_kafkas() -> None:
    """Key: version 0, type (ABORT 0, COMMIT 1); value: version 0, coordinator epoch."""
    (record,) = decode_records(build_marker_batch(1, 0, True, 5, 0))
    assert record.key == struct.pack(">hh", 0, COMMIT)
    assert record.value == struct.pack(">hi", 0, 5)
    (record,) = decode_records(build_marker_batch(1, 0, False, 5, 0))
    assert record.key == struct.pack(">hh", 0, ABORT)


def test_a_newer_marker_version_with_more_fields_still_reads() -> None:
    batch = make_batch(
        [struct.pack(">hi", 1, 9) + b"extra"],
        keys=[struct.pack(">hh", 1, COMMIT)],
        extra_attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL,
    )
    assert read_marker(batch) == (True, 9)


@pytest.mark.parametrize(
    ("keys", "values", "attributes"),
    [
        ([struct.pack(">hh", 0, 7)], [struct.pack(">hi", 0, 1)], ATTR_CONTROL),  # unknown type
        ([None], [struct.pack(">hi", 0, 1)], ATTR_CONTROL),  # no key
        ([struct.pack(">hh", 0, COMMIT)], [b"\x00"], ATTR_CONTROL),  # short value
        ([struct.pack(">hh", 0, COMMIT)], [struct.pack(">hi", 0, 1)], 0),  # not control
    ],
)
def test_malformed_markers_are_refused(
    keys: list[bytes | None], values: list[bytes | None], attributes: int
) -> None:
    with pytest.raises(InvalidMarkerError):
        read_marker(make_batch(values, keys=keys, extra_attributes=attributes))
