"""Low-level writers for the Kafka wire format, each returning the bytes of one value.

Encoders collect these pieces in a list and join it once: in CPython that is much cheaper
than writing field by field into a stream. Variable-length values come in two flavours:

* legacy (non-flexible versions): int16 string length, int32 bytes/array length, -1 = null;
* compact (flexible versions, KIP-482): unsigned varint of length + 1, 0 = null, and every
  struct ends with a tagged-field section.

`LEGACY` and `COMPACT` bundle the writers of each flavour so an encoder picks its flavour
once per response, and its loops carry no per-field version checks.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from functools import lru_cache
from struct import Struct
from typing import NamedTuple

INT16 = Struct(">h")
INT32 = Struct(">i")
INT64 = Struct(">q")

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""The authorized operations of an answer not asked for them (Kafka's
AUTHORIZED_OPERATIONS_OMITTED, Integer.MIN_VALUE): Metadata's and DescribeCluster's, the
describe APIs' of topics and groups."""

BOOLEAN = (b"\x00", b"\x01")
"""Indexed by a bool: ``BOOLEAN[flag]``."""

EMPTY_TAGGED_FIELDS = b"\x00"
"""A tagged-field section holding no field (a varint count of zero)."""

_SMALL_UVARINTS = tuple(bytes((n,)) for n in range(128))


def uvarint(value: int) -> bytes:
    """Unsigned varint (7 bits per byte, low group first); one byte for values below 128."""
    if 0 <= value < 128:
        return _SMALL_UVARINTS[value]
    if value < 0:
        raise ValueError(f"an unsigned varint cannot be {value}")
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at `pos` and the position after it. Kafka's are at most 5 bytes (32
    bits); a longer or truncated one is a ValueError."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise ValueError("bad unsigned varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def uuid(value: bytes) -> bytes:
    """A UUID is 16 raw bytes (all zero means "none"); any other length would shift the frame."""
    if len(value) != 16:
        raise ValueError(f"a UUID is 16 bytes, got {len(value)}")
    return value


def uuid_string(value: bytes) -> str:
    """Kafka's `Uuid.toString()` of 16 bytes: URL-safe base64 without padding (how Kafka
    names member ids and cluster ids, and renders topic ids in keys and logs)."""
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


def tagged_fields(fields: Sequence[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: count, then (tag, size, payload) per field.

    Callers pass only the fields to send, in ascending tag order (the spec requires it).
    """
    parts = [uvarint(len(fields))]
    for tag, payload in fields:
        parts += (uvarint(tag), uvarint(len(payload)), payload)
    return b"".join(parts)


def legacy_string(value: str) -> bytes:
    data = value.encode()
    return INT16.pack(len(data)) + data


def legacy_nullable_string(value: str | None) -> bytes:
    return b"\xff\xff" if value is None else legacy_string(value)


def compact_string(value: str) -> bytes:
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_nullable_string(value: str | None) -> bytes:
    return b"\x00" if value is None else compact_string(value)


def compact_length(count: int) -> bytes:
    """Length prefix of a compact array or compact bytes (count + 1; 0 is null)."""
    return uvarint(count + 1)


@lru_cache(maxsize=256)
def _int32s(count: int) -> Struct:
    # Replica lists have cluster-sized lengths, so a small cache covers every shape seen.
    return Struct(f">{count}i")


def legacy_int32_array(values: Sequence[int]) -> bytes:
    count = len(values)
    return INT32.pack(count) + _int32s(count).pack(*values)


def compact_int32_array(values: Sequence[int]) -> bytes:
    count = len(values)
    return uvarint(count + 1) + _int32s(count).pack(*values)


class Wire(NamedTuple):
    """The writers for variable-length values in one flavour of the format."""

    flexible: bool
    string: Callable[[str], bytes]
    nullable_string: Callable[[str | None], bytes]
    array_length: Callable[[int], bytes]
    bytes_length: Callable[[int], bytes]
    null_array: bytes
    null_bytes: bytes
    int32_array: Callable[[Sequence[int]], bytes]


LEGACY = Wire(
    flexible=False,
    string=legacy_string,
    nullable_string=legacy_nullable_string,
    array_length=INT32.pack,
    bytes_length=INT32.pack,
    null_array=b"\xff\xff\xff\xff",
    null_bytes=b"\xff\xff\xff\xff",
    int32_array=legacy_int32_array,
)

COMPACT = Wire(
    flexible=True,
    string=compact_string,
    nullable_string=compact_nullable_string,
    array_length=compact_length,
    bytes_length=compact_length,
    null_array=b"\x00",
    null_bytes=b"\x00",
    int32_array=compact_int32_array,
)
