"""Sans-io Kafka codec: request headers, request bodies (kio) and response framing.

Nothing here touches a socket. The server hands in a frame (the bytes after the 4-byte length
prefix) and gets back a decoded request; handlers hand back either a kio response object, which
is encoded here with kio's generic writer, or bytes already encoded by `encoders.py`.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import sys
import uuid
from dataclasses import dataclass
from functools import cache
from pkgutil import resolve_name
from typing import Any

from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.protocol import Entity

from dataplane.protocol import primitives
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.legacy import SCHEMAS as LEGACY_SCHEMAS

_HEAD = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_SIZE = struct.Struct(">i")
_SIZE_CORR = struct.Struct(">ii")

API_VERSIONS = 18


class MalformedRequest(Exception):
    """The frame cannot be parsed; Kafka closes the connection on such input."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`; returns (value, next position)."""
    try:
        return primitives.read_uvarint(buf, pos)
    except ValueError as e:
        raise MalformedRequest(str(e)) from None


@cache
def entity_class(api_key: int, version: int, kind: EntityType) -> Any:
    """The kio dataclass of a request or response (or of a version or an API kio lacks, see
    `legacy`), or None if there is no such version."""
    if kind is EntityType.nested:  # nested entities have no schema of their own
        return None
    name = api_key_map.get(api_key)
    path = schema_name_map[name].get(version, {}).get(kind) if name is not None else None
    if path is None:
        path = LEGACY_SCHEMAS.get((api_key, version), {}).get(kind)
    return resolve_name(path) if path else None


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def is_flexible(api_key: int, version: int) -> bool:
    cls = entity_class(api_key, version, EntityType.request)
    return bool(cls is not None and cls.__flexible__)


def parse_header(frame: bytes, supported: dict[int, tuple[int, int]]) -> RequestHeader:
    """Parse a request header (v1, or v2 for flexible versions).

    The header's version depends on the body's, so an unknown key or version is parsed as v1:
    the caller still needs the correlation id to answer ApiVersions with UNSUPPORTED_VERSION.
    """
    if len(frame) < _HEAD.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, n = _HEAD.unpack_from(frame, 0)
    pos = _HEAD.size
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise MalformedRequest("client id runs past the end of the frame")
        try:
            client_id = bytes(frame[pos : pos + n]).decode()
        except UnicodeDecodeError as e:
            raise MalformedRequest("client id is not UTF-8") from e
        pos += n
    elif n != -1:
        raise MalformedRequest(f"bad client id length {n}")
    lo_hi = supported.get(api_key)
    if lo_hi and lo_hi[0] <= api_version <= lo_hi[1] and is_flexible(api_key, api_version):
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise MalformedRequest("tagged fields run past the end of the frame")
    return pos


def decode_body(header: RequestHeader, frame: bytes) -> Any:
    """Decode the request body with kio; MalformedRequest if it does not parse."""
    cls = entity_class(header.api_key, header.api_version, EntityType.request)
    try:
        body, _size = _reader(cls)(frame, header.body_offset)
    except Exception as e:  # kio raises a variety of errors on bad input
        raise MalformedRequest(f"cannot decode {cls.__name__}: {e}") from e
    return body


def response_header_flexible(api_key: int, version: int) -> bool:
    """Flexible responses use header v1, except ApiVersions which always uses v0 (KIP-511)."""
    return api_key != API_VERSIONS and is_flexible(api_key, version)


def frame_response(correlation_id: int, flexible_header: bool, body: bytes | list) -> list:
    """Length prefix + response header + body, as a list of buffers for one vectored write."""
    parts = body if isinstance(body, list) else [body]
    size = 4 + (1 if flexible_header else 0) + sum(len(p) for p in parts)
    head = _SIZE_CORR.pack(size, correlation_id) + (b"\x00" if flexible_header else b"")
    return [head, *parts]


def encode_with_kio(response: Entity) -> bytes:
    """Generic (slow, pure Python) encoding for responses off the hot paths."""
    buf = io.BytesIO()
    _writer(type(response))(buf, response)
    return buf.getvalue()


def _coerce(kafka_type: str | None, value: Any) -> Any:
    """Map plain values onto the types kio's writer expects for a field."""
    if value is None:
        return None
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid" and isinstance(value, bytes):
        return None if value == bytes(16) else uuid.UUID(bytes=value)
    return value


@cache
def _field_types(cls: type) -> dict[str, str | None]:
    return {f.name: f.metadata.get("kafka_type") for f in dataclasses.fields(cls)}


@cache
def _fields_in_any_version(api_key: int, kind: EntityType, name: str) -> frozenset[str] | None:
    """The field names class ``name`` has in at least one version of the API, or None if no
    version has such a class."""
    api = api_key_map.get(api_key)
    versions = set(schema_name_map[api] if api is not None else ())
    versions |= {v for k, v in LEGACY_SCHEMAS if k == api_key}
    found: set[str] | None = None
    for version in versions:
        entity = entity_class(api_key, version, kind)
        cls = entity and getattr(sys.modules[entity.__module__], name, None)
        if cls is not None:
            found = (found or set()) | set(_field_types(cls))
    return None if found is None else frozenset(found)


class EntityBuilder:
    """Builds kio messages of one API version from plain values.

    `b.Name(field=value, ...)` constructs the dataclass `Name` of that version's request or
    response module, dropping fields the version does not have and converting ints/bytes to
    kio's ErrorCode, timedelta and UUID types, so one handler body serves every version. A class
    or field name that no version of the API has is a bug, not a version difference: it raises
    instead of being dropped.
    """

    def __init__(self, api_key: int, version: int, kind: EntityType) -> None:
        self._api_key, self._kind = api_key, kind
        self._module = sys.modules[entity_class(api_key, version, kind).__module__]

    def __getattr__(self, name: str) -> Any:
        known = _fields_in_any_version(self._api_key, self._kind, name)
        if known is None:
            raise AttributeError(f"no version of API {self._api_key} has a {name}")
        cls = getattr(self._module, name, None)
        if cls is None:  # a nested type this version lacks; its parent field is dropped too
            return lambda **_values: None
        types = _field_types(cls)

        def build(**values: Any) -> Any:
            if unknown := values.keys() - known:
                raise TypeError(f"no version of API {self._api_key}'s {name} has {unknown}")
            return cls(**{k: _coerce(types[k], v) for k, v in values.items() if k in types})

        return build


def ResponseBuilder(api_key: int, version: int) -> EntityBuilder:  # noqa: N802 - reads as a class
    """An EntityBuilder for responses: what handlers use."""
    return EntityBuilder(api_key, version, EntityType.response)
