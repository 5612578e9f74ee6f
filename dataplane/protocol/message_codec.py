"""Kafka's message format, driven by schemas generated from Kafka's JSON message specs.

`python -m proto.generate_records` turns a spec (`proto/kafka-message-specs/*.json`) into a
frozen dataclass per struct and a `Message` describing its fields: the versions each exists in,
nullable and tagged versions, defaults. This module reads and writes any such message at any of
its versions, as Kafka's generated Java code does: in flexible versions strings, bytes and
arrays are compact (unsigned varint of length + 1) and every struct ends with a tagged-field
section; a tagged field is written only when it differs from its default; tags the schema does
not know are kept in the struct's `unknown_tags` and written back, so a round trip is lossless.

It serves the records of the coordinators' topics, not the produce/fetch path.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from dataplane.protocol import primitives
from dataplane.protocol.primitives import read_uvarint, uvarint

Versions = tuple[int, int]
"""An inclusive range of versions; (1, 0) is empty (Kafka's "none")."""

NO_VERSIONS: Versions = (1, 0)
ALL_VERSIONS: Versions = (0, 0x7FFF)

Tags = tuple[tuple[int, bytes], ...]
"""Tagged fields the schema does not know, kept verbatim: (tag, payload) by ascending tag."""


class CorruptRecord(ValueError):
    """Bytes that do not parse as the schema says."""


class UnknownVersion(CorruptRecord):
    """A message written at a version the schema does not know (a newer Kafka's)."""


def record_type(key: bytes | None) -> int:
    """The record type of a coordinator topic's record key (`__consumer_offsets`,
    `__transaction_state`, `__share_group_state`): its first int16, Kafka's key version before
    4.0 and the key schema's apiKey since. A null key or one shorter than that raises
    CorruptRecord, which loaders skip with a warning, so a malformed key never stops a load."""
    if key is None or len(key) < 2:
        size = "null" if key is None else f"{len(key)} bytes"
        raise CorruptRecord(f"a coordinator record key starts with its int16 type, not {size}")
    kind: int = primitives.INT16.unpack_from(key)[0]
    return kind


def _in(versions: Versions, version: int) -> bool:
    return versions[0] <= version <= versions[1]


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """An array of a primitive type (its name) or of a struct."""

    element: str | Struct


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct: `type` is a primitive type's name, a `Struct` or an `ArrayOf`.
    A field absent from a version, or a tagged field not sent, reads as `default`."""

    name: str
    type: str | Struct | ArrayOf
    versions: Versions = ALL_VERSIONS
    nullable: Versions = NO_VERSIONS
    tagged: Versions = NO_VERSIONS
    tag: int | None = None
    default: Any = None


@dataclass(frozen=True, slots=True)
class Struct:
    """A struct and the dataclass it decodes to (constructed with every field by keyword, plus
    `unknown_tags` when `keeps_tags`: the message has flexible versions)."""

    cls: type
    fields: tuple[Field, ...]
    keeps_tags: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    """A top-level message: its valid and flexible versions and its struct. `api_key` is the
    spec's: the record type of a coordinator record's key and value."""

    name: str
    valid: Versions
    flexible: Versions
    struct: Struct
    api_key: int | None = None

    def encode(self, value: Any, version: int) -> bytes:
        if not _in(self.valid, version):
            raise ValueError(f"{self.name} has no version {version}")
        out = bytearray()
        _write_struct(out, self.struct, value, version, _in(self.flexible, version))
        return bytes(out)

    def decode(self, data: bytes | memoryview, version: int, pos: int = 0) -> tuple[Any, int]:
        """(the value, the position after it); raises CorruptRecord, UnknownVersion."""
        if not _in(self.valid, version):
            raise UnknownVersion(f"{self.name} has no version {version}")
        try:
            return _read_struct(data, pos, self.struct, version, _in(self.flexible, version))
        except CorruptRecord:
            raise
        except (struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
            raise CorruptRecord(f"cannot decode {self.name} v{version}: {e}") from e


_FIXED = {
    "bool": struct.Struct(">?"),
    "int8": struct.Struct(">b"),
    "int16": primitives.INT16,
    "uint16": struct.Struct(">H"),
    "int32": primitives.INT32,
    "uint32": struct.Struct(">I"),
    "int64": primitives.INT64,
    "float64": struct.Struct(">d"),
}
_INT32 = primitives.INT32


# ---------------------------------------------------------------- writing


def _write_struct(out: bytearray, s: Struct, value: Any, version: int, flexible: bool) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f in s.fields:
        if not _in(f.versions, version):
            continue
        v = getattr(value, f.name)
        if f.tag is not None and flexible and _in(f.tagged, version):
            if v != f.default:
                buf = bytearray()
                _write_value(buf, f, f.type, v, version, flexible)
                tagged.append((f.tag, bytes(buf)))
            continue
        _write_value(out, f, f.type, v, version, flexible)
    if flexible:
        if s.keeps_tags:
            tagged += value.unknown_tags
            tagged.sort()
        out += uvarint(len(tagged))
        for tag, data in tagged:
            out += uvarint(tag)
            out += uvarint(len(data))
            out += data


def _write_length(out: bytearray, n: int, flexible: bool, size: struct.Struct) -> None:
    """The length of a string, bytes or array; -1 is null."""
    if flexible:
        out += uvarint(n + 1)
    else:
        out += size.pack(n)


def _write_value(
    out: bytearray, f: Field, t: str | Struct | ArrayOf, v: Any, version: int, flexible: bool
) -> None:
    nullable = _in(f.nullable, version)
    if v is None and not nullable:
        raise ValueError(f"{f.name} is not nullable in version {version}")
    if isinstance(t, Struct):
        if nullable:
            out.append(0xFF if v is None else 1)  # Kafka's null marker of a nullable struct
        if v is not None:
            _write_struct(out, t, v, version, flexible)
    elif isinstance(t, ArrayOf):
        if v is None:
            _write_length(out, -1, flexible, _INT32)
            return
        _write_length(out, len(v), flexible, _INT32)
        element = Field(f.name, t.element)
        for item in v:
            _write_value(out, element, t.element, item, version, flexible)
    elif t == "string" or t == "bytes":
        size = primitives.INT16 if t == "string" else _INT32
        if v is None:
            _write_length(out, -1, flexible, size)
            return
        raw = v.encode() if t == "string" else bytes(v)
        _write_length(out, len(raw), flexible, size)
        out += raw
    elif t == "uuid":
        out += primitives.uuid(v)
    else:
        out += _FIXED[t].pack(v)


# ---------------------------------------------------------------- reading


def _read_struct(
    data: bytes | memoryview, pos: int, s: Struct, version: int, flexible: bool
) -> tuple[Any, int]:
    values: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for f in s.fields:
        if not _in(f.versions, version):
            values[f.name] = f.default
        elif f.tag is not None and flexible and _in(f.tagged, version):
            tagged[f.tag] = f
            values[f.name] = f.default
        else:
            values[f.name], pos = _read_value(data, pos, f, f.type, version, flexible)
    if flexible:
        unknown = []
        count, pos = read_uvarint(data, pos)
        for _ in range(count):
            tag, pos = read_uvarint(data, pos)
            size, pos = read_uvarint(data, pos)
            end = pos + size
            if end > len(data):
                raise CorruptRecord(f"tagged field {tag} runs past the end")
            field = tagged.get(tag)
            if field is None:
                unknown.append((tag, bytes(data[pos:end])))
            else:
                values[field.name], after = _read_value(
                    data, pos, field, field.type, version, flexible
                )
                if after != end:
                    raise CorruptRecord(f"tagged field {field.name} is not {size} bytes")
            pos = end
        if s.keeps_tags:
            values["unknown_tags"] = tuple(unknown)
    return s.cls(**values), pos


def _read_length(
    data: bytes | memoryview, pos: int, flexible: bool, size: struct.Struct
) -> tuple[int, int]:
    if flexible:
        n, pos = read_uvarint(data, pos)
        return n - 1, pos
    return size.unpack_from(data, pos)[0], pos + size.size


def _read_value(
    data: bytes | memoryview,
    pos: int,
    f: Field,
    t: str | Struct | ArrayOf,
    version: int,
    flexible: bool,
) -> tuple[Any, int]:
    if isinstance(t, Struct):
        if _in(f.nullable, version):
            marker = data[pos]
            pos += 1
            if marker >= 0x80:  # -1 as an int8
                return None, pos
        return _read_struct(data, pos, t, version, flexible)
    if isinstance(t, ArrayOf):
        n, pos = _read_length(data, pos, flexible, _INT32)
        if n < 0:
            _check_nullable(f, version)
            return None, pos
        element = Field(f.name, t.element)
        items = []
        for _ in range(n):
            item, pos = _read_value(data, pos, element, t.element, version, flexible)
            items.append(item)
        return tuple(items), pos
    if t == "string" or t == "bytes":
        n, pos = _read_length(data, pos, flexible, primitives.INT16 if t == "string" else _INT32)
        if n < 0:
            _check_nullable(f, version)
            return None, pos
        end = pos + n
        if end > len(data):
            raise CorruptRecord(f"{f.name} runs past the end")
        raw = bytes(data[pos:end])
        return (raw.decode() if t == "string" else raw), end
    if t == "uuid":
        if pos + 16 > len(data):
            raise CorruptRecord(f"{f.name} runs past the end")
        return bytes(data[pos : pos + 16]), pos + 16
    fixed = _FIXED[t]
    return fixed.unpack_from(data, pos)[0], pos + fixed.size


def _check_nullable(f: Field, version: int) -> None:
    if not _in(f.nullable, version):
        raise CorruptRecord(f"null for {f.name}, not nullable in version {version}")
