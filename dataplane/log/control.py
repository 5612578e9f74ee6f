"""Transaction markers: the control batches that end a transaction in a partition (Kafka's
EndTransactionMarker and ControlRecordType).

A marker is a batch with the TRANSACTIONAL and CONTROL attributes, the producer's id and epoch,
no sequence (-1), and one record whose key is ``version i16 (0) | type i16`` (ABORT=0, COMMIT=1)
and whose value is ``version i16 (0) | coordinatorEpoch i32``. The transaction coordinator has
each partition leader append one (`Partition.write_marker`); consumers and the producer state
read it back with `read_marker`. Markers are the one kind of batch whose record the broker
decodes on the append path: one tiny record per transaction and partition.
"""

from __future__ import annotations

import struct

from dataplane.log.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, header_at
from dataplane.log.records import build_batch as _build_batch
from dataplane.log.records import decode_records

ABORT = 0
COMMIT = 1
CONTROL_VERSION = 0
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch (later versions may add fields)


class InvalidMarkerError(ValueError):
    """A control batch that is not a well-formed COMMIT/ABORT marker."""


def build_marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp: int
) -> bytes:
    """A marker batch at base offset 0, for `PartitionLog.append_as_leader(from_client=False)`."""
    key = _KEY.pack(CONTROL_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(CONTROL_VERSION, coordinator_epoch)
    return _build_batch(
        [(key, value)],
        timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
    )


def read_marker(batch: bytes | memoryview) -> tuple[bool, int]:
    """(commit?, coordinator epoch) of one whole marker batch. Raises `InvalidMarkerError` for
    an emptied control batch (the cleaner's), an unknown control type or a short record."""
    info = header_at(batch, 0)
    if not info.is_control:
        raise InvalidMarkerError(f"batch at offset {info.base_offset} is not a control batch")
    record = next(decode_records(bytes(batch[: info.size])), None)
    if record is None or record.key is None or len(record.key) < _KEY.size:
        raise InvalidMarkerError(f"control batch at offset {info.base_offset} has no marker key")
    _version, kind = _KEY.unpack_from(record.key)
    if kind not in (ABORT, COMMIT):
        raise InvalidMarkerError(
            f"control batch at offset {info.base_offset}: unknown control type {kind}"
        )
    if record.value is None or len(record.value) < _VALUE.size:
        raise InvalidMarkerError(f"control batch at offset {info.base_offset}: short marker value")
    _version, coordinator_epoch = _VALUE.unpack_from(record.value)
    return kind == COMMIT, coordinator_epoch
