"""The shared writers against kio's own writers, value by value."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import writers

from dataplane.protocol import primitives


def kio_bytes(writer: Callable[[Any, Any], None], value: object) -> bytes:
    buffer = io.BytesIO()
    writer(buffer, value)
    return buffer.getvalue()


@given(st.integers(0, 2**64))
def test_uvarint(value: int) -> None:
    assert primitives.uvarint(value) == kio_bytes(writers.write_unsigned_varint, value)


@given(st.integers(0, 2**32 - 1))
def test_read_uvarint(value: int) -> None:
    data = primitives.uvarint(value)
    assert primitives.read_uvarint(b"x" + data + b"rest", 1) == (value, 1 + len(data))


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff\xff\xff\xff\x01"])
def test_read_uvarint_refuses_truncated_and_overlong(data: bytes) -> None:
    with pytest.raises(ValueError, match="bad unsigned varint"):
        primitives.read_uvarint(data, 0)


def test_uvarint_refuses_negative() -> None:
    with pytest.raises(ValueError, match="cannot be -1"):
        primitives.uvarint(-1)


@pytest.mark.parametrize(
    ("ours", "kio_writer", "values"),
    [
        (primitives.legacy_string, writers.write_legacy_string, st.text()),
        (
            primitives.legacy_nullable_string,
            writers.write_nullable_legacy_string,
            st.none() | st.text(),
        ),
        (primitives.compact_string, writers.write_compact_string, st.text(max_size=300)),
        (
            primitives.compact_nullable_string,
            writers.write_nullable_compact_string,
            st.none() | st.text(max_size=300),
        ),
    ],
)
@given(data=st.data())
def test_strings(ours, kio_writer, values, data) -> None:
    value = data.draw(values)
    assert ours(value) == kio_bytes(kio_writer, value)


@pytest.mark.parametrize(
    ("ours", "kio_array_writer"),
    [
        (primitives.legacy_int32_array, writers.legacy_array_writer),
        (primitives.compact_int32_array, writers.compact_array_writer),
    ],
)
@given(values=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=200))
def test_int32_arrays(ours, kio_array_writer, values) -> None:
    assert ours(values) == kio_bytes(kio_array_writer(writers.write_int32), values)


def test_tagged_fields() -> None:
    assert primitives.tagged_fields([]) == primitives.EMPTY_TAGGED_FIELDS
    assert primitives.tagged_fields([(0, b"ab"), (200, b"x" * 130)]) == (
        b"\x02" + b"\x00\x02ab" + b"\xc8\x01" + b"\x82\x01" + b"x" * 130
    )
