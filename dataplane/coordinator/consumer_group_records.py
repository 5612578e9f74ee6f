"""The KIP-848 consumer group records of `__consumer_offsets`, byte for byte as Kafka writes them.

Kafka's coordinator record format (`CoordinatorRecordSerde`)::

    record key   = int16 record type  + key message   (keys: version 0, not flexible)
    record value = int16 value version + value message (values: version 0, flexible)
    tombstone    = the key with a null value

The record type is the key schema's `apiKey`. The consumer group ("modern" / KIP-848) types:

    3  ConsumerGroupMetadata           key GroupId                     value Epoch; tags:
                                                                             0 MetadataHash,
                                                                             1 CreationTimeMs
    4  ConsumerGroupPartitionMetadata  key GroupId                     value Topics[] (Kafka
                                                                             4.1+ only deletes it)
    5  ConsumerGroupMemberMetadata     key GroupId, MemberId           value a subscription
    6  ConsumerGroupTargetAssignmentMetadata  key GroupId              value AssignmentEpoch;
                                                                             tag 0 Timestamp
    7  ConsumerGroupTargetAssignmentMember    key GroupId, MemberId    value TopicPartitions[]
    8  ConsumerGroupCurrentMemberAssignment   key GroupId, MemberId    value epochs, state,
                                                                             partitions
    16 ConsumerGroupRegularExpression  key GroupId, RegularExpression  value Topics, Version,
                                                                             Timestamp

Types 0-2 (offset commits, classic group metadata) belong to the classic coordinator; 9-15 and
17+ (share and streams groups, share state) are not handled here: `decode_key` returns None for
them.

Encoding follows the schemas of Kafka 4.x (`group-coordinator/src/main/resources/common/message`):
keys are plain version-0 messages (int16-length strings); values are flexible (compact strings
and arrays, unsigned-varint lengths + 1, every struct closed by a tagged-field section). A tagged
field is written only when it differs from its default, as Kafka's generated code does. Tagged
fields this module does not interpret are kept as raw bytes and written back unchanged, so a
decode/encode round trip is lossless.

Topic ids are 16 raw bytes (as in `dataplane.metadata_cache`). Collections are written in a
deterministic order (topics by id, partitions ascending, names sorted) — Kafka writes them in
hash-set order, which carries no meaning.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "CURRENT_MEMBER_ASSIGNMENT",
    "GROUP_METADATA",
    "MEMBER_METADATA",
    "PARTITION_METADATA",
    "REGULAR_EXPRESSION",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "ConsumerGroupMetadataValue",
    "CurrentMemberAssignmentValue",
    "GroupKey",
    "Key",
    "MemberKey",
    "MemberMetadataValue",
    "PartitionMetadataValue",
    "RecordFormatError",
    "RegexKey",
    "RegularExpressionValue",
    "TargetAssignmentMemberValue",
    "TargetAssignmentMetadataValue",
    "TopicMetadataEntry",
    "TopicPartitions",
    "Value",
    "decode",
    "decode_key",
    "decode_value",
    "encode",
    "encode_key",
    "encode_value",
    "record_type",
    "topic_partitions",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

CONSUMER_GROUP_RECORD_TYPES = frozenset(
    {
        GROUP_METADATA,
        PARTITION_METADATA,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
        REGULAR_EXPRESSION,
    }
)

_GROUP_KEY_TYPES = frozenset({GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA})
_MEMBER_KEY_TYPES = frozenset(
    {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT}
)

VALUE_VERSION = 0
"""Every KIP-848 value schema has the single version 0."""

Tags = tuple[tuple[int, bytes], ...]
"""Tagged fields kept verbatim: (tag, payload) in ascending tag order."""


class RecordFormatError(ValueError):
    """A record that does not parse as the schema of its type says."""


# -- keys ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Key of the per-group records: ConsumerGroupMetadata (3), ConsumerGroupPartitionMetadata
    (4), ConsumerGroupTargetAssignmentMetadata (6)."""

    type: int
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberKey:
    """Key of the per-member records: MemberMetadata (5), TargetAssignmentMember (7),
    CurrentMemberAssignment (8)."""

    type: int
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RegexKey:
    """Key of ConsumerGroupRegularExpression (16)."""

    group_id: str
    regex: str
    type: int = REGULAR_EXPRESSION


Key = GroupKey | MemberKey | RegexKey


# -- values --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """A topic id and partitions. `assignment_epochs` (KIP-1251, tag 0) exists only in
    ConsumerGroupCurrentMemberAssignmentValue; elsewhere it must stay None."""

    topic_id: bytes
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    """Type 3: the group epoch. MetadataHash (KIP-1101) is the hash of the subscribed topics'
    metadata whose change triggers a rebalance; CreationTimeMs (KIP-1282) when the group was
    created."""

    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class TopicMetadataEntry:
    """One topic of ConsumerGroupPartitionMetadataValue; `partition_metadata` is
    ((partition, (rack, ...)), ...)."""

    topic_id: bytes
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    """Type 4: the subscription metadata of Kafka 3.7-4.0. Kafka 4.1+ only tombstones it."""

    topics: tuple[TopicMetadataEntry, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """Type 5: a member's subscription. `classic_member_metadata` is the raw payload of tag 0
    (a member using the classic protocol in a consumer group; not produced here)."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: bytes | None = None
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class TargetAssignmentMetadataValue:
    """Type 6: the epoch of the target assignment (and, KIP-1263, when it was computed)."""

    assignment_epoch: int
    assignment_timestamp_ms: int = 0
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    """Type 7: a member's partitions in the target assignment."""

    topic_partitions: tuple[TopicPartitions, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentValue:
    """Type 8: a member's epochs, reconciliation state (0 STABLE, 1 UNREVOKED_PARTITIONS,
    2 UNRELEASED_PARTITIONS, 127 UNKNOWN) and current assignment."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class RegularExpressionValue:
    """Type 16: the topics a subscribed regular expression resolved to, the metadata version it
    was resolved against and when."""

    topics: tuple[str, ...]
    version: int
    timestamp: int
    unknown_tags: Tags = field(default=())


Value = (
    ConsumerGroupMetadataValue
    | PartitionMetadataValue
    | MemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
    | RegularExpressionValue
)

_VALUE_TYPES: dict[type, int] = {
    ConsumerGroupMetadataValue: GROUP_METADATA,
    PartitionMetadataValue: PARTITION_METADATA,
    MemberMetadataValue: MEMBER_METADATA,
    TargetAssignmentMetadataValue: TARGET_ASSIGNMENT_METADATA,
    TargetAssignmentMemberValue: TARGET_ASSIGNMENT_MEMBER,
    CurrentMemberAssignmentValue: CURRENT_MEMBER_ASSIGNMENT,
    RegularExpressionValue: REGULAR_EXPRESSION,
}


def topic_partitions(assignment: Mapping[bytes, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """{topic id: partitions} as sorted TopicPartitions, topics without partitions left out."""
    out = []
    for topic_id in sorted(assignment):
        parts = tuple(sorted(assignment[topic_id]))
        if parts:
            out.append(TopicPartitions(topic_id, parts))
    return tuple(out)


# -- writer --------------------------------------------------------------------------------

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise ValueError("negative unsigned varint")
        while v >= 0x80:
            self.buf.append(v & 0x7F | 0x80)
            v >>= 7
        self.buf.append(v)

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise ValueError(f"a topic id is 16 bytes, got {len(v)}")
        self.buf += v

    def legacy_string(self, v: str) -> None:
        data = v.encode()
        if len(data) > 0x7FFF:
            raise ValueError("string too long")
        self.int16(len(data))
        self.buf += data

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode()
        self.uvarint(len(data) + 1)
        self.buf += data

    def compact_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        self.uvarint(len(v) + 1)
        self.buf += v

    def array_len(self, n: int | None) -> None:
        self.uvarint(0 if n is None else n + 1)

    def int32_array(self, values: Iterable[int] | None) -> None:
        if values is None:
            self.array_len(None)
            return
        values = tuple(values)
        self.array_len(len(values))
        for v in values:
            self.int32(v)

    def string_array(self, values: Iterable[str]) -> None:
        values = tuple(values)
        self.array_len(len(values))
        for v in values:
            self.compact_string(v)

    def tags(self, known: list[tuple[int, bytes]], unknown: Tags) -> None:
        fields = sorted([*known, *unknown])
        self.uvarint(len(fields))
        for tag, payload in fields:
            self.uvarint(tag)
            self.uvarint(len(payload))
            self.buf += payload


def _int64_bytes(v: int) -> bytes:
    return _I64.pack(v)


# -- reader --------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("truncated record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def uuid(self) -> bytes:
        return bytes(self._take(16))

    def _utf8(self, n: int) -> str:
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"invalid UTF-8: {e}") from None

    def legacy_string(self) -> str:
        n = self.int16()
        if n < 0:
            raise RecordFormatError("null string in a key")
        return self._utf8(n)

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._utf8(n - 1)

    def compact_string_nonnull(self) -> str:
        s = self.compact_string()
        if s is None:
            raise RecordFormatError("null for a non-nullable string")
        return s

    def array_len(self) -> int | None:
        n = self.uvarint()
        return None if n == 0 else n - 1

    def array_len_nonnull(self) -> int:
        n = self.array_len()
        if n is None:
            raise RecordFormatError("null for a non-nullable array")
        return n

    def int32_array(self) -> tuple[int, ...] | None:
        n = self.array_len()
        if n is None:
            return None
        return tuple(self.int32() for _ in range(n))

    def string_array(self) -> tuple[str, ...]:
        return tuple(self.compact_string_nonnull() for _ in range(self.array_len_nonnull()))

    def tags(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self._take(self.uvarint()))
        return out

    def done(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{len(self.data) - self.pos} trailing bytes")


def _tag_int64(tags: dict[int, bytes], tag: int, default: int) -> int:
    payload = tags.pop(tag, None)
    if payload is None:
        return default
    if len(payload) != 8:
        raise RecordFormatError(f"tagged int64 {tag} has {len(payload)} bytes")
    return _I64.unpack(payload)[0]


def _rest(tags: dict[int, bytes]) -> Tags:
    return tuple(sorted(tags.items()))


# -- keys: encode/decode -------------------------------------------------------------------


def encode_key(key: Key) -> bytes:
    w = _Writer()
    w.int16(key.type)
    w.legacy_string(key.group_id)
    if isinstance(key, MemberKey):
        if key.type not in _MEMBER_KEY_TYPES:
            raise ValueError(f"record type {key.type} has no member key")
        w.legacy_string(key.member_id)
    elif isinstance(key, RegexKey):
        w.legacy_string(key.regex)
    elif key.type not in _GROUP_KEY_TYPES:
        raise ValueError(f"record type {key.type} has no group key")
    return bytes(w.buf)


def record_type(key: bytes) -> int:
    """The record type (first int16) of any `__consumer_offsets` record key."""
    if len(key) < 2:
        raise RecordFormatError("key shorter than its type")
    return _I16.unpack_from(key)[0]


def decode_key(data: bytes) -> Key | None:
    """The key of a KIP-848 consumer group record, or None for another record type."""
    r = _Reader(data)
    kind = r.int16()
    if kind not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    group_id = r.legacy_string()
    key: Key
    if kind in _MEMBER_KEY_TYPES:
        key = MemberKey(kind, group_id, r.legacy_string())
    elif kind == REGULAR_EXPRESSION:
        key = RegexKey(group_id, r.legacy_string())
    else:
        key = GroupKey(kind, group_id)
    r.done()
    return key


# -- values: encode ------------------------------------------------------------------------


def _write_topic_partitions(w: _Writer, tps: tuple[TopicPartitions, ...], epochs: bool) -> None:
    w.array_len(len(tps))
    for tp in tps:
        w.uuid(tp.topic_id)
        w.int32_array(tp.partitions)
        known: list[tuple[int, bytes]] = []
        if tp.assignment_epochs is not None:
            if not epochs:
                raise ValueError("AssignmentEpochs only exist in CurrentMemberAssignment")
            sub = _Writer()
            sub.int32_array(tp.assignment_epochs)
            known.append((0, bytes(sub.buf)))
        w.tags(known, tp.unknown_tags)


def encode_value(value: Value) -> bytes:
    """int16 version (0) + the flexible value message."""
    w = _Writer()
    w.int16(VALUE_VERSION)
    known: list[tuple[int, bytes]] = []
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
        if value.metadata_hash != 0:
            known.append((0, _int64_bytes(value.metadata_hash)))
        if value.creation_time_ms != -1:
            known.append((1, _int64_bytes(value.creation_time_ms)))
    elif isinstance(value, PartitionMetadataValue):
        w.array_len(len(value.topics))
        for t in value.topics:
            w.uuid(t.topic_id)
            w.compact_string(t.topic_name)
            w.int32(t.num_partitions)
            w.array_len(len(t.partition_metadata))
            for partition, racks in t.partition_metadata:
                w.int32(partition)
                w.string_array(racks)
                w.tags([], ())
            w.tags([], ())
    elif isinstance(value, MemberMetadataValue):
        w.compact_string(value.instance_id)
        w.compact_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.string_array(value.subscribed_topic_names)
        w.compact_string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.compact_string(value.server_assignor)
        if value.classic_member_metadata is not None:
            known.append((0, value.classic_member_metadata))
    elif isinstance(value, TargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
        if value.assignment_timestamp_ms != 0:
            known.append((0, _int64_bytes(value.assignment_timestamp_ms)))
    elif isinstance(value, TargetAssignmentMemberValue):
        _write_topic_partitions(w, value.topic_partitions, epochs=False)
    elif isinstance(value, CurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        _write_topic_partitions(w, value.assigned_partitions, epochs=True)
        _write_topic_partitions(w, value.partitions_pending_revocation, epochs=True)
    elif isinstance(value, RegularExpressionValue):
        w.string_array(value.topics)
        w.int64(value.version)
        w.int64(value.timestamp)
    else:
        raise TypeError(f"not a consumer group record value: {value!r}")
    w.tags(known, value.unknown_tags)
    return bytes(w.buf)


# -- values: decode ------------------------------------------------------------------------


def _read_topic_partitions(r: _Reader) -> tuple[TopicPartitions, ...]:
    out = []
    for _ in range(r.array_len_nonnull()):
        topic_id = r.uuid()
        parts = r.int32_array()
        if parts is None:
            raise RecordFormatError("null partitions")
        tags = r.tags()
        epochs = None
        if 0 in tags:
            epochs = _Reader(tags.pop(0)).int32_array()
        out.append(TopicPartitions(topic_id, parts, epochs, _rest(tags)))
    return tuple(out)


def decode_value(kind: int, data: bytes) -> Value:
    r = _Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown value version {version} for record type {kind}")
    value: Value
    if kind == GROUP_METADATA:
        epoch = r.int32()
        tags = r.tags()
        value = ConsumerGroupMetadataValue(
            epoch, _tag_int64(tags, 0, 0), _tag_int64(tags, 1, -1), _rest(tags)
        )
    elif kind == PARTITION_METADATA:
        topics = []
        for _ in range(r.array_len_nonnull()):
            topic_id = r.uuid()
            name = r.compact_string_nonnull()
            num = r.int32()
            pm = []
            for _ in range(r.array_len_nonnull()):
                partition = r.int32()
                racks = r.string_array()
                r.tags()
                pm.append((partition, racks))
            r.tags()
            topics.append(TopicMetadataEntry(topic_id, name, num, tuple(pm)))
        value = PartitionMetadataValue(tuple(topics), _rest(r.tags()))
    elif kind == MEMBER_METADATA:
        instance_id = r.compact_string()
        rack_id = r.compact_string()
        client_id = r.compact_string_nonnull()
        client_host = r.compact_string_nonnull()
        names = r.string_array()
        regex = r.compact_string()
        rebalance_timeout = r.int32()
        assignor = r.compact_string()
        tags = r.tags()
        classic = tags.pop(0, None)
        value = MemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            regex,
            rebalance_timeout,
            assignor,
            classic,
            _rest(tags),
        )
    elif kind == TARGET_ASSIGNMENT_METADATA:
        epoch = r.int32()
        tags = r.tags()
        value = TargetAssignmentMetadataValue(epoch, _tag_int64(tags, 0, 0), _rest(tags))
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        tps = _read_topic_partitions(r)
        value = TargetAssignmentMemberValue(tps, _rest(r.tags()))
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        member_epoch = r.int32()
        previous = r.int32()
        state = r.int8()
        assigned = _read_topic_partitions(r)
        pending = _read_topic_partitions(r)
        value = CurrentMemberAssignmentValue(
            member_epoch, previous, state, assigned, pending, _rest(r.tags())
        )
    elif kind == REGULAR_EXPRESSION:
        topics_ = r.string_array()
        version_ = r.int64()
        timestamp = r.int64()
        value = RegularExpressionValue(topics_, version_, timestamp, _rest(r.tags()))
    else:
        raise RecordFormatError(f"record type {kind} is not a consumer group record")
    r.done()
    return value


# -- whole records -------------------------------------------------------------------------


def encode(key: Key, value: Value | None) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone), ready for `CoordinatorRuntime.write`."""
    if value is not None and _VALUE_TYPES[type(value)] != key.type:
        raise ValueError(f"{type(value).__name__} does not go with record type {key.type}")
    return encode_key(key), None if value is None else encode_value(value)


def decode(key: bytes, value: bytes | None) -> tuple[Key, Value | None] | None:
    """A decoded KIP-848 record, or None when the key is of another record type."""
    k = decode_key(key)
    if k is None:
        return None
    return k, None if value is None else decode_value(k.type, value)
