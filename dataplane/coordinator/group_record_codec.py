"""The coordinator record format of the KIP-848 family's group records (share and streams
groups): a key is the int16 record type then the key message at version 0 (group id, and the
member id for per-member types); a value is an int16 version then the flexible value message; a
tombstone has no value. `RecordCodec` does it for one group type, given its generated schemas."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dataplane.protocol.message_codec import CorruptRecord, Message, record_type

_I16 = struct.Struct(">h")
VALUE_VERSION = 0

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class Key:
    """A group record key: `member_id` is "" for the per-group types."""

    type: int
    group_id: str
    member_id: str = ""


class RecordCodec:
    """Encodes and decodes the records of one group type: `keys`/`values` are the generated
    schemas by record type, `value_types` each value class's record type, `member_types` the
    types whose key has a member id."""

    def __init__(
        self,
        keys: Mapping[int, Message],
        values: Mapping[int, Message],
        value_types: Mapping[type, int],
        member_types: frozenset[int],
    ) -> None:
        self.keys, self.values = keys, values
        self.value_types, self.member_types = value_types, member_types
        self.types = frozenset(keys)

    def encode(self, key: Key, value: Any | None) -> Record:
        """(key bytes, value bytes or None for a tombstone)."""
        if value is not None and self.value_types.get(type(value)) != key.type:
            raise ValueError(f"{type(value).__name__} does not go with record type {key.type}")
        schema = self.keys[key.type]
        fields = (key.group_id, key.member_id) if key.type in self.member_types else (key.group_id,)
        key_bytes = _I16.pack(key.type) + schema.encode(schema.struct.cls(*fields), 0)
        if value is None:
            return key_bytes, None
        return key_bytes, _I16.pack(VALUE_VERSION) + self.values[key.type].encode(
            value, VALUE_VERSION
        )

    def decode(self, key: bytes, value: bytes | None) -> tuple[Key, Any | None] | None:
        """A decoded record of this group type, None for another record type."""
        kind = record_type(key)
        if kind not in self.types:
            return None
        decoded, end = self.keys[kind].decode(key, 0, 2)
        if end != len(key):
            raise CorruptRecord(f"{len(key) - end} trailing bytes in the key")
        k = Key(kind, decoded.group_id, getattr(decoded, "member_id", ""))
        if value is None:
            return k, None
        if len(value) < 2:
            raise CorruptRecord("value shorter than its version")
        v, end = self.values[kind].decode(value, _I16.unpack_from(value)[0], 2)
        if end != len(value):
            raise CorruptRecord(f"{len(value) - end} trailing bytes in the value")
        return k, v
