"""The record type at the head of every coordinator topic's record key (`__consumer_offsets`,
`__transaction_state`, `__share_group_state`)."""

from __future__ import annotations

import struct

import pytest

from dataplane.protocol.message_codec import CorruptRecord, record_type


def test_the_type_is_the_keys_first_int16() -> None:
    assert record_type(struct.pack(">h", 2) + b"\x00\x01g") == 2
    assert record_type(struct.pack(">h", 16)) == 16
    assert record_type(b"\xff\xff") == -1  # signed, as Kafka's getShort


@pytest.mark.parametrize("key", [None, b"", b"\x00"], ids=["null", "empty", "one-byte"])
def test_a_key_too_short_for_its_type_is_a_corrupt_record(key: bytes | None) -> None:
    """Loaders skip a CorruptRecord with a warning; anything else would stop the load."""
    with pytest.raises(CorruptRecord, match="starts with its int16 type"):
        record_type(key)
