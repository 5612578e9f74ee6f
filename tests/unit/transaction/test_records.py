"""The `__transaction_state` records: round trips and Kafka's bytes."""

from __future__ import annotations

import struct

import pytest

from dataplane.log.records import Record
from dataplane.protocol.message_codec import CorruptRecord
from dataplane.transaction.records import decode_key, decode_value, encode_key, encode_value
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import TV_0, TV_1, TV_2, TransactionState, TxnTransitMetadata

S = TransactionState


def transit(state: S, partitions=frozenset(), tv: int = TV_2) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=1000,
        prev_producer_id=999,
        next_producer_id=1001,
        producer_epoch=5,
        last_producer_epoch=4,
        txn_timeout_ms=60_000,
        state=state,
        partitions=frozenset(partitions),
        txn_start_timestamp=1_700_000_000_000,
        txn_last_update_timestamp=1_700_000_000_123,
        client_transaction_version=tv,
    )


def test_key_is_version_0_and_a_string() -> None:
    key = encode_key("my-txn")
    assert key == struct.pack(">hh", 0, 6) + b"my-txn"
    assert decode_key(key) == "my-txn"
    assert decode_key(struct.pack(">hh", 7, 1) + b"x") is None  # unknown key version
    with pytest.raises(CorruptRecord):
        decode_key(b"\x00")


@pytest.mark.parametrize("tv", [TV_0, TV_1, TV_2])
def test_value_round_trip(tv: int) -> None:
    t = transit(S.ONGOING, {("b", 1), ("a", 2), ("a", 0)}, tv)
    value = encode_value(t, tv)
    assert struct.unpack_from(">h", value)[0] == (0 if tv == TV_0 else 1)
    meta = decode_value("x", value)
    assert meta is not None
    assert meta.state == S.ONGOING
    assert meta.partitions == {("a", 0), ("a", 2), ("b", 1)}
    assert (meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms) == (1000, 5, 60_000)
    assert meta.txn_start_timestamp == 1_700_000_000_000
    assert meta.txn_last_update_timestamp == 1_700_000_000_123
    assert meta.last_producer_epoch == -1  # not in the record, as in Kafka
    if tv == TV_0:  # v0 has no tagged fields: their defaults come back
        assert (meta.previous_producer_id, meta.next_producer_id) == (-1, -1)
        assert meta.client_transaction_version == 0
    else:
        assert (meta.previous_producer_id, meta.next_producer_id) == (999, 1001)
        assert meta.client_transaction_version == tv


def test_value_v0_bytes_are_kafkas() -> None:
    value = encode_value(transit(S.PREPARE_COMMIT, {("t", 3)}), TV_0)
    expected = (
        struct.pack(">hqhib", 0, 1000, 5, 60_000, 2)
        + struct.pack(">i", 1)  # one topic
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">ii", 1, 3)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )
    assert value == expected


def test_empty_state_has_null_partitions() -> None:
    value = encode_value(transit(S.EMPTY), TV_0)
    assert struct.pack(">i", -1) in value
    with pytest.raises(ValueError, match="an Empty transaction has no partitions"):
        encode_value(transit(S.EMPTY, {("a", 0)}), TV_0)


def test_tombstone_and_shard_replay() -> None:
    shard = TransactionShard(0, 3)
    key = encode_key("a")
    shard.replay(Record(0, 0, key, encode_value(transit(S.ONGOING, {("x", 0)}), TV_2), ()))
    shard.replay(Record(1, 0, key, encode_value(transit(S.PREPARE_ABORT, {("x", 0)}), TV_2), ()))
    assert shard.transactions["a"].state == S.PREPARE_ABORT
    shard.replay(Record(2, 0, encode_key("b"), encode_value(transit(S.EMPTY), TV_2), ()))
    shard.replay(Record(3, 0, key, None, ()))
    assert set(shard.transactions) == {"b"}
    shard.replay(Record(4, 0, key, b"\x00\x09garbage", ()))  # unknown version: skipped
    shard.replay(Record(5, 0, struct.pack(">hh", 3, 1) + b"z", None, ()))  # unknown key
    assert shard.skipped_records == 2
    assert set(shard.transactions) == {"b"}
    for offset, short_key in enumerate((None, b"", b"\x00"), start=6):
        shard.replay(Record(offset, 0, short_key, b"\x00\x01", ()))
    assert shard.skipped_records == 5
