"""The records of `__consumer_offsets`, byte for byte as Kafka writes them.

A record's key starts with a big-endian int16, the *record type* (Kafka's "key version" before
4.0, the coordinator-key `apiKey` since), followed by the key's fields serialized at version 0.
The value (None: a tombstone) starts with its own int16 version, then the value's fields at
that version. Types 0 and 1 are OffsetCommit (0 is the pre-0.10 legacy key, same layout),
2 is GroupMetadata; KIP-848 adds types 3-8 (consumer groups) and later ones (share and
streams groups). Kafka 3.x and 4.x write OffsetCommitValue v3 (v1 when the commit carries an
expire timestamp, OffsetCommit v2-v4 with a retention time) and GroupMetadataValue v3.

The codec is driven by schemas that mirror Kafka's JSON message definitions (`Field`,
`Struct`, `Message`: versions, nullable versions, flexible versions, tagged fields), so a new
record type is a few lines: define its key and value messages and `register_record_type`.
`decode_record` returns None for a record type nobody registered, so a shard skips records of
group types it does not know (as Kafka does with unknown record types it can ignore).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------- schema-driven codec


def _version_range(spec: str) -> tuple[int, int]:
    """Kafka's version syntax: "0+", "3+", "1", "0-4", "none" -> (low, high) inclusive."""
    if spec == "none":
        return (1, 0)  # empty
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(spec: str, version: int) -> bool:
    lo, hi = _version_range(spec)
    return lo <= version <= hi


@dataclass(frozen=True)
class Field:
    """One field of a Kafka message schema.

    `type`: "bool", "int8", "int16", "int32", "int64", "uuid", "string", "bytes", "[]<primitive>"
    (e.g. "[]int32", "[]string"), a `Struct`, or `ArrayOf(Struct)`. `tag` makes it a tagged
    field (flexible versions only; written only when it differs from its default). A field
    absent from a version reads as its default: `default`, None with `null_default`, else the
    type's zero value.
    """

    name: str
    type: Any
    versions: str = "0+"
    nullable: str = "none"
    default: Any = None
    tag: int | None = None
    null_default: bool = False  # Kafka's "default": "null"

    def present(self, version: int) -> bool:
        return _in(self.versions, version)

    def default_value(self) -> Any:
        if self.null_default:
            return None
        if self.default is not None:
            return self.default
        t = self.type
        if isinstance(t, ArrayOf) or (isinstance(t, str) and t.startswith("[]")):
            return ()
        return (
            {
                "bool": False,
                "int8": 0,
                "int16": 0,
                "int32": 0,
                "int64": 0,
                "string": "",
                "bytes": b"",
                "uuid": uuid.UUID(int=0),
            }.get(t)
            if isinstance(t, str)
            else None
        )


@dataclass(frozen=True)
class Struct:
    """A (possibly nested) struct; decoded as `cls(**fields)` when `cls` is set, else a dict."""

    fields: tuple[Field, ...]
    cls: type | None = None


@dataclass(frozen=True)
class ArrayOf:
    struct: Struct


@dataclass(frozen=True)
class Message:
    """A top-level message: its valid and flexible versions and its struct."""

    name: str
    valid: str
    flexible: str
    struct: Struct

    def encode(self, value: Any, version: int) -> bytes:
        if not _in(self.valid, version):
            raise ValueError(f"{self.name} has no version {version}")
        out = bytearray()
        _write_struct(out, self.struct, value, version, _in(self.flexible, version))
        return bytes(out)

    def decode(self, data: bytes | memoryview, version: int, pos: int = 0) -> tuple[Any, int]:
        if not _in(self.valid, version):
            raise UnknownVersion(f"{self.name} has no version {version}")
        return _read_struct(data, pos, self.struct, version, _in(self.flexible, version))


class UnknownVersion(ValueError):
    """A record written with a version this codec does not know (a newer Kafka's)."""


_I8, _I16 = struct.Struct(">b"), struct.Struct(">h")
_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")


def _uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError("varint too long")


def _get(value: Any, name: str) -> Any:
    return value[name] if isinstance(value, dict) else getattr(value, name)


def _write_struct(out: bytearray, s: Struct, value: Any, version: int, flexible: bool) -> None:
    tagged = []
    for f in s.fields:
        if not f.present(version):
            continue
        v = _get(value, f.name)
        if f.tag is not None:
            if flexible and v != f.default_value():
                buf = bytearray()
                _write_value(buf, f, v, version, flexible)
                tagged.append((f.tag, bytes(buf)))
            continue
        _write_value(out, f, v, version, flexible)
    if flexible:
        _uvarint(out, len(tagged))
        for tag, data in sorted(tagged):
            _uvarint(out, tag)
            _uvarint(out, len(data))
            out += data


def _write_value(out: bytearray, f: Field, v: Any, version: int, flexible: bool) -> None:
    t = f.type
    nullable = _in(f.nullable, version)
    if v is None and not nullable:
        raise ValueError(f"{f.name} is not nullable in version {version}")
    if isinstance(t, Struct):
        if v is None:
            out.append(0xFF)  # -1 as int8: a null struct
            return
        if nullable:
            out.append(1)
        _write_struct(out, t, v, version, flexible)
    elif isinstance(t, ArrayOf) or t.startswith("[]"):
        if v is None:
            if flexible:
                _uvarint(out, 0)
            else:
                out += _I32.pack(-1)
            return
        if flexible:
            _uvarint(out, len(v) + 1)
        else:
            out += _I32.pack(len(v))
        for item in v:
            if isinstance(t, ArrayOf):
                _write_struct(out, t.struct, item, version, flexible)
            else:
                _write_value(out, Field("item", t[2:]), item, version, flexible)
    elif t == "string" or t == "bytes":
        if v is None:
            if flexible:
                _uvarint(out, 0)
            else:
                out += (_I16 if t == "string" else _I32).pack(-1)
            return
        raw = v.encode() if t == "string" else bytes(v)
        if flexible:
            _uvarint(out, len(raw) + 1)
        else:
            out += (_I16 if t == "string" else _I32).pack(len(raw))
        out += raw
    elif t == "int16":
        out += _I16.pack(v)
    elif t == "int32":
        out += _I32.pack(v)
    elif t == "int64":
        out += _I64.pack(v)
    elif t == "int8":
        out += _I8.pack(v)
    elif t == "bool":
        out.append(1 if v else 0)
    elif t == "uuid":
        out += v.bytes
    else:
        raise ValueError(f"unknown field type {t!r}")


def _read_struct(
    data: bytes | memoryview, pos: int, s: Struct, version: int, flexible: bool
) -> tuple[Any, int]:
    values: dict[str, Any] = {}
    tags = {}
    for f in s.fields:
        if f.tag is not None:
            tags[f.tag] = f
            values[f.name] = f.default_value()
        elif f.present(version):
            values[f.name], pos = _read_value(data, pos, f, version, flexible)
        else:
            values[f.name] = f.default_value()
    if flexible:
        count, pos = _read_uvarint(data, pos)
        for _ in range(count):
            tag, pos = _read_uvarint(data, pos)
            size, pos = _read_uvarint(data, pos)
            f = tags.get(tag)
            if f is not None and f.present(version):
                values[f.name], _ = _read_value(data, pos, f, version, flexible)
            pos += size  # unknown tags are skipped, as Kafka does
    return (s.cls(**values) if s.cls else values), pos


def _read_value(
    data: bytes | memoryview, pos: int, f: Field, version: int, flexible: bool
) -> tuple[Any, int]:
    t = f.type
    if isinstance(t, Struct):
        if _in(f.nullable, version):
            (marker,) = _I8.unpack_from(data, pos)
            pos += 1
            if marker < 0:
                return None, pos
        return _read_struct(data, pos, t, version, flexible)
    if isinstance(t, ArrayOf) or t.startswith("[]"):
        if flexible:
            n, pos = _read_uvarint(data, pos)
            n -= 1
        else:
            (n,) = _I32.unpack_from(data, pos)
            pos += 4
        if n < 0:
            return None, pos
        items = []
        for _ in range(n):
            if isinstance(t, ArrayOf):
                item, pos = _read_struct(data, pos, t.struct, version, flexible)
            else:
                item, pos = _read_value(data, pos, Field("item", t[2:]), version, flexible)
            items.append(item)
        return tuple(items), pos
    if t == "string" or t == "bytes":
        if flexible:
            n, pos = _read_uvarint(data, pos)
            n -= 1
        else:
            size = _I16 if t == "string" else _I32
            (n,) = size.unpack_from(data, pos)
            pos += size.size
        if n < 0:
            return None, pos
        raw = bytes(data[pos : pos + n])
        if len(raw) != n:
            raise ValueError(f"{f.name} runs past the end of the record")
        return (raw.decode() if t == "string" else raw), pos + n
    if t == "int16":
        return _I16.unpack_from(data, pos)[0], pos + 2
    if t == "int32":
        return _I32.unpack_from(data, pos)[0], pos + 4
    if t == "int64":
        return _I64.unpack_from(data, pos)[0], pos + 8
    if t == "int8":
        return _I8.unpack_from(data, pos)[0], pos + 1
    if t == "bool":
        return data[pos] != 0, pos + 1
    if t == "uuid":
        return uuid.UUID(bytes=bytes(data[pos : pos + 16])), pos + 16
    raise ValueError(f"unknown field type {t!r}")


# ---------------------------------------------------------------- the classic record types


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1  # v3+
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # v1 only


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None  # v3+
    client_id: str
    client_host: str
    rebalance_timeout: int  # v1+ (-1 when read from v0: use the session timeout)
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1  # v2+
    members: tuple[MemberMetadata, ...] = ()


OFFSET_COMMIT_KEY = Message(
    "OffsetCommitKey",
    "0",
    "none",
    Struct(
        (Field("group", "string"), Field("topic", "string"), Field("partition", "int32")),
        OffsetCommitKey,
    ),
)
OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    "0-4",
    "4+",
    Struct(
        (
            Field("offset", "int64"),
            Field("leader_epoch", "int32", "3+", default=-1),
            Field("metadata", "string"),
            Field("commit_timestamp", "int64"),
            Field("expire_timestamp", "int64", "1", default=-1),
        ),
        OffsetCommitValue,
    ),
)
GROUP_METADATA_KEY = Message(
    "GroupMetadataKey", "0", "none", Struct((Field("group", "string"),), GroupMetadataKey)
)
_MEMBER_METADATA = Struct(
    (
        Field("member_id", "string"),
        Field("group_instance_id", "string", "3+", nullable="3+", null_default=True),
        Field("client_id", "string"),
        Field("client_host", "string"),
        Field("rebalance_timeout", "int32", "1+", default=-1),
        Field("session_timeout", "int32"),
        Field("subscription", "bytes"),
        Field("assignment", "bytes"),
    ),
    MemberMetadata,
)
GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    "0-4",
    "4+",
    Struct(
        (
            Field("protocol_type", "string"),
            Field("generation", "int32"),
            Field("protocol", "string", nullable="0+"),
            Field("leader", "string", nullable="0+"),
            Field("current_state_timestamp", "int64", "2+", default=-1),
            Field("members", ArrayOf(_MEMBER_METADATA)),
        ),
        GroupMetadataValue,
    ),
)

# The versions Kafka 3.x/4.x write.
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


# ---------------------------------------------------------------- record types and dispatch

OFFSET_COMMIT = 1  # record type (key version); 0 is the legacy key of the same layout
GROUP_METADATA = 2


@dataclass(frozen=True)
class RecordType:
    """One kind of `__consumer_offsets` record: `type_id` is the key's int16 prefix."""

    type_id: int
    name: str
    key: Message
    value: Message
    key_version: int = 0  # the version the key's fields are serialized at
    aliases: tuple[int, ...] = ()  # other type ids that decode the same way (legacy keys)


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """A decoded record: `type_id` normalized (a legacy alias maps to its type)."""

    type_id: int
    key: Any
    value: Any | None  # None: a tombstone
    value_version: int = -1


_TYPES: dict[int, RecordType] = {}


def register_record_type(record_type: RecordType) -> None:
    """Make `decode_record` understand a record type (and its aliases)."""
    for type_id in (record_type.type_id, *record_type.aliases):
        _TYPES[type_id] = record_type


def record_type(type_id: int) -> RecordType | None:
    return _TYPES.get(type_id)


register_record_type(
    RecordType(OFFSET_COMMIT, "OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE, aliases=(0,))
)
register_record_type(
    RecordType(GROUP_METADATA, "GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE)
)


class CorruptRecord(ValueError):
    """A record of a known type whose bytes do not parse."""


def decode_record(key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
    """Decode one record of the topic; None for a record type nobody registered (skip it).

    Raises CorruptRecord when a known record type does not parse, UnknownVersion (a subclass)
    when its value has a version this codec does not know.
    """
    if key is None or len(key) < 2:
        raise CorruptRecord("a __consumer_offsets record needs a key of at least 2 bytes")
    (type_id,) = _I16.unpack_from(key, 0)
    rt = _TYPES.get(type_id)
    if rt is None:
        return None
    try:
        decoded_key, _ = rt.key.decode(key, rt.key_version, 2)
        if value is None:
            return CoordinatorRecord(rt.type_id, decoded_key, None)
        (version,) = _I16.unpack_from(value, 0)
        decoded_value, _ = rt.value.decode(value, version, 2)
    except UnknownVersion:
        raise
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
        raise CorruptRecord(f"cannot decode a {rt.name} record: {e}") from e
    return CoordinatorRecord(rt.type_id, decoded_key, decoded_value, version)


def encode_key(type_id: int, key: Any) -> bytes:
    rt = _TYPES[type_id]
    return _I16.pack(type_id) + rt.key.encode(key, rt.key_version)


def encode_value(type_id: int, value: Any, version: int) -> bytes:
    return _I16.pack(version) + _TYPES[type_id].value.encode(value, version)


# ---------------------------------------------------------------- helpers for the classic types


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return encode_key(OFFSET_COMMIT, OffsetCommitKey(group, topic, partition))


def offset_commit_record(
    group: str, topic: str, partition: int, value: OffsetCommitValue | None
) -> tuple[bytes, bytes | None]:
    """(key, value) of an OffsetCommit record, as Kafka writes it; None value: tombstone."""
    key = offset_commit_key(group, topic, partition)
    if value is None:
        return key, None
    version = (
        OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        if value.expire_timestamp >= 0
        else OFFSET_COMMIT_VALUE_VERSION
    )
    return key, encode_value(OFFSET_COMMIT, value, version)


def group_metadata_record(
    group: str, value: GroupMetadataValue | None
) -> tuple[bytes, bytes | None]:
    """(key, value) of a GroupMetadata record (value v3, as Kafka writes); None: tombstone."""
    key = encode_key(GROUP_METADATA, GroupMetadataKey(group))
    if value is None:
        return key, None
    return key, encode_value(GROUP_METADATA, value, GROUP_METADATA_VALUE_VERSION)


# ---------------------------------------------------------------- the consumer protocol


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (the "consumer" protocol's member
    metadata: int16 version, then the topic names); None if it does not parse."""
    try:
        pos = 2
        (count,) = _I32.unpack_from(subscription, pos)
        pos += 4
        topics = set()
        for _ in range(count):
            (n,) = _I16.unpack_from(subscription, pos)
            pos += 2
            if n < 0 or pos + n > len(subscription):
                return None
            topics.add(subscription[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
