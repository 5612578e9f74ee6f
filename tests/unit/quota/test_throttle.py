"""Throttling a client: the throttle time its response carries and the mute of its
connection (KIP-219)."""

from __future__ import annotations

import datetime
import time

import anyio
import pytest

from dataplane.handlers.context import Connection
from dataplane.protocol.codec import ResponseBuilder
from dataplane.quota.throttle import mute, user_of, wait_unmuted, with_throttle_time


def test_a_kio_response_gets_the_larger_throttle_time() -> None:
    b = ResponseBuilder(48, 1)
    response = b.DescribeClientQuotasResponse(
        throttle_time=0, error_code=0, error_message=None, entries=()
    )
    throttled = with_throttle_time(response, 250)
    assert throttled.throttle_time == datetime.timedelta(milliseconds=250)
    assert with_throttle_time(throttled, 100).throttle_time == datetime.timedelta(milliseconds=250)


def test_encoded_bodies_are_left_to_their_handlers() -> None:
    assert with_throttle_time(b"body", 100) == b"body"


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
