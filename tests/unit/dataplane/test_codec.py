"""Request header parsing and response framing (the sans-io codec)."""

from __future__ import annotations

import struct

import pytest
from kio.serial import entity_reader
from kio.static.constants import EntityType

from dataplane.protocol.codec import (
    MalformedRequest,
    ResponseBuilder,
    decode_body,
    encode_with_kio,
    entity_class,
    frame_response,
    parse_header,
    read_uvarint,
    response_header_flexible,
)
from dataplane.protocol.errors import CONTROLLER_ID_NOT_REGISTERED, ErrorCode, KafkaError
from dataplane.protocol.primitives import uvarint

SUPPORTED = {0: (3, 11), 3: (0, 13), 18: (0, 4)}


def _header(
    api_key: int, version: int, corr: int, client_id: bytes | None, tagged: bytes = b""
) -> bytes:
    cid = (
        struct.pack(">h", -1)
        if client_id is None
        else struct.pack(">h", len(client_id)) + client_id
    )
    return struct.pack(">hhi", api_key, version, corr) + cid + tagged


def test_header_v1() -> None:
    frame = _header(3, 1, 7, b"me") + b"BODY"
    h = parse_header(frame, SUPPORTED)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 1, 7, "me")
    assert frame[h.body_offset :] == b"BODY"


def test_header_v2_skips_tagged_fields() -> None:
    tagged = b"\x02" + b"\x00\x01X" + b"\x05\x02YZ"  # two tagged fields
    frame = _header(3, 12, 9, None, tagged) + b"BODY"
    h = parse_header(frame, SUPPORTED)
    assert h.client_id is None
    assert frame[h.body_offset :] == b"BODY"


def test_unsupported_version_header_is_parsed_as_v1() -> None:
    """The correlation id must still be readable to answer ApiVersions with UNSUPPORTED_VERSION."""
    h = parse_header(_header(18, 99, 5, b"x") + b"\x00", SUPPORTED)
    assert (h.api_version, h.correlation_id) == (99, 5)


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x03",  # shorter than a header
        _header(3, 1, 1, b"abc")[:-1],  # client id cut short
        struct.pack(">hhih", 3, 1, 1, -5),  # bad client id length
        _header(3, 12, 1, None, b"\x01\x00\x09ab"),  # tagged field runs past the end
        _header(3, 12, 1, b"\xff\xfe"),  # client id not UTF-8
    ],
)
def test_malformed_headers(frame: bytes) -> None:
    with pytest.raises(MalformedRequest):
        parse_header(frame, SUPPORTED)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**28 - 1])
def test_uvarint_round_trip(value: int) -> None:
    assert read_uvarint(uvarint(value) + b"rest", 0) == (value, len(uvarint(value)))


def test_frame_response_lengths() -> None:
    parts = frame_response(42, True, [b"ab", memoryview(b"cde")])
    data = b"".join(parts)
    assert struct.unpack(">ii", data[:8]) == (len(data) - 4, 42)
    assert data[8:9] == b"\x00"
    assert data[9:] == b"abcde"
    assert b"".join(frame_response(1, False, b"xy"))[8:] == b"xy"


def test_api_versions_response_header_is_always_v0() -> None:
    assert not response_header_flexible(18, 3)
    assert response_header_flexible(3, 9)
    assert not response_header_flexible(3, 8)


def test_response_builder_drops_fields_a_version_lacks() -> None:
    old, new = ResponseBuilder(19, 2), ResponseBuilder(19, 7)
    kwargs = dict(
        name="t",
        topic_id=bytes(16),
        error_code=0,
        error_message=None,
        num_partitions=3,
        configs=None,
    )
    assert old.CreatableTopicConfigs(name="x") is None  # v2 has no per-topic configs at all
    encoded_old = encode_with_kio(
        old.CreateTopicsResponse(throttle_time=0, topics=(old.CreatableTopicResult(**kwargs),))
    )
    encoded_new = encode_with_kio(
        new.CreateTopicsResponse(throttle_time=0, topics=(new.CreatableTopicResult(**kwargs),))
    )
    assert len(encoded_new) > len(encoded_old)


def test_an_api_kio_lacks_is_decoded_and_answered() -> None:
    """UnregisterController (94, Kafka 4.4): its generated schema serves like kio's, and its
    error code 136, which kio's enum lacks, is written and read as a member of it."""
    frame = _header(94, 0, 9, b"me", tagged=b"\x00") + struct.pack(">i", 42) + b"\x00"
    header = parse_header(frame, {94: (0, 0)})
    assert frame[header.body_offset :] == struct.pack(">i", 42) + b"\x00"
    assert decode_body(header, frame).controller_id == 42
    answer = ResponseBuilder(94, 0).UnregisterControllerResponse(
        throttle_time=0, error_code=136, error_message="Controller ID 42 is not..."
    )
    body = encode_with_kio(answer)
    cls = entity_class(94, 0, EntityType.response)
    decoded = entity_reader(cls)(body, 0)[0]
    assert decoded.error_code == ErrorCode(136) == CONTROLLER_ID_NOT_REGISTERED
    assert decoded.error_code.name == "controller_id_not_registered"
    assert KafkaError(136).code is CONTROLLER_ID_NOT_REGISTERED
