"""SASL/PLAIN (RFC 4616) with Kafka's JAAS user_<name> convention."""

from __future__ import annotations

import anyio
import pytest

from dataplane.security.sasl.mechanism import SaslFailure
from dataplane.security.sasl.plain import PlainServer, plain_users

USERS = plain_users({"username": "admin", "password": "x", "user_alice": "alice-secret"})


def evaluate(message: bytes) -> PlainServer:
    server = PlainServer(USERS)

    async def main() -> None:
        assert await server.evaluate(message) == b""

    anyio.run(main)
    return server


def test_users_come_from_user_options_only() -> None:
    assert USERS == {"alice": b"alice-secret"}


def test_success() -> None:
    for message in (b"\x00alice\x00alice-secret", b"alice\x00alice\x00alice-secret"):
        identity = evaluate(message).identity
        assert identity is not None
        assert identity.principal == "User:alice"


@pytest.mark.parametrize(
    ("message", "public"),
    [
        (b"\x00alice\x00Wr0ngPw", "Invalid username or password"),
        (b"\x00mallory\x00alice-secret", "Invalid username or password"),
        (b"\x00alice\x00alice-secre", "Invalid username or password"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"bob\x00alice\x00alice-secret", "authorization id"),
        (b"garbage", "expected 3 tokens"),
        (b"a\x00b\x00c\x00d", "expected 3 tokens"),
        (b"\x00\xff\x00\xfe", None),
    ],
)
def test_refusals(message: bytes, public: str | None) -> None:
    with pytest.raises(SaslFailure) as e:
        evaluate(message)
    if public:
        assert e.value.public is not None
        assert public in e.value.public
    assert "alice-secret" not in e.value.reason
    assert "Wr0ngPw" not in e.value.reason
