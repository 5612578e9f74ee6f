"""Throttling a client: the throttle time its response carries and the mute of its
connection (KIP-219)."""

from __future__ import annotations

import datetime
import time
import uuid

import anyio
import pytest
from kio.serial import entity_reader
from kio.static.constants import EntityType

from dataplane.connection import Connection
from dataplane.protocol.codec import ResponseBuilder, entity_class
from dataplane.protocol.encoders import (
    ProducePartition,
    ProduceTopic,
    encode_metadata_response,
    encode_produce_response,
)
from dataplane.quota.throttle import mute, user_of, wait_unmuted, with_throttle_time


def test_a_kio_response_gets_the_larger_throttle_time() -> None:
    b = ResponseBuilder(48, 1)
    response = b.DescribeClientQuotasResponse(
        throttle_time=0, error_code=0, error_message=None, entries=()
    )
    throttled = with_throttle_time(response, 250, 48, 1)
    assert throttled.throttle_time == datetime.timedelta(milliseconds=250)
    assert with_throttle_time(throttled, 100, 48, 1).throttle_time == datetime.timedelta(
        milliseconds=250
    )


def test_encoded_metadata_and_fetch_get_the_larger_throttle_time() -> None:
    """A request_percentage throttle reaches the encoded Metadata and Fetch answers (their
    first field), which the broker used to send with 0 while it muted the connection."""
    body = encode_metadata_response(12, [], [], "cluster", 1)
    throttled = with_throttle_time(body, 250, 3, 12)
    assert throttled[:4] == (250).to_bytes(4, "big")
    assert throttled[4:] == body[4:]
    assert with_throttle_time(throttled, 100, 3, 12) == throttled
    fetch = (300).to_bytes(4, "big") + b"rest"
    assert with_throttle_time(fetch, 100, 1, 12) == fetch  # its own is larger
    assert with_throttle_time(fetch, 400, 1, 12)[:4] == (400).to_bytes(4, "big")


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_encoded_produce_gets_the_larger_throttle_time(version: int) -> None:
    """A request_percentage throttle reaches Produce's answer too (its field follows the
    topics), as Kafka's handleProduceRequest answers the larger of its two throttles."""
    topics = [ProduceTopic("t", [ProducePartition(0, 0, 5, -1, 0)], uuid.uuid4().bytes)]
    body = encode_produce_response(version, topics, throttle_time_ms=100)
    reader = entity_reader(entity_class(0, version, EntityType.response))
    throttled = with_throttle_time(body, 250, 0, version)
    answer = reader(throttled, 0)[0]
    assert answer.throttle_time == datetime.timedelta(milliseconds=250)
    assert answer.responses == reader(body, 0)[0].responses
    assert with_throttle_time(body, 50, 0, version) == body  # its own is larger


def test_encoded_bodies_without_the_field_are_left_as_they_are() -> None:
    assert with_throttle_time(b"body", 100, 3, 2) == b"body"  # Metadata v2 has no field


def test_the_principal_name_is_the_user() -> None:
    assert user_of(Connection("p", principal="User:alice")) == "alice"
    assert user_of(Connection("p")) == "ANONYMOUS"


@pytest.mark.anyio
async def test_a_muted_connection_waits_out_the_longest_throttle() -> None:
    conn = Connection("p")
    mute(conn, 150)
    mute(conn, 50)  # a shorter throttle does not shorten the mute
    started = time.monotonic()
    await wait_unmuted(conn)
    assert time.monotonic() - started >= 0.14
    assert conn.muted_until == 0.0
    with anyio.fail_after(0.05):
        await wait_unmuted(conn)  # not muted: no wait


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
