"""Delegation token rules a broker applies (Kafka's DelegationTokenControlManager, KafkaApis)."""

from __future__ import annotations

import datetime
import hashlib
import hmac

from dataplane.config import BrokerConfig
from dataplane.connection import Connection
from dataplane.security.sasl import SaslSession, tokens

CONFIG = BrokerConfig.load(
    overrides={
        "delegation.token.secret.key": "k",
        "delegation.token.max.lifetime.ms": "100000",
        "delegation.token.expiry.time.ms": "10000",
    }
)


def test_new_token_lifetimes_and_hmac() -> None:
    t = tokens.new_token(CONFIG, "User:a", "User:b", ["User:c"], -1, 1000)
    assert (t.issue_ms, t.expiry_ms, t.max_ms) == (1000, 11000, 101000)
    assert t.hmac == hmac.new(b"k", t.token_id.encode(), hashlib.sha512).digest()
    assert (t.owner, t.requester, t.renewers) == ("User:a", "User:b", ("User:c",))
    short = tokens.new_token(CONFIG, "User:a", "User:a", [], 5000, 1000)
    assert (short.expiry_ms, short.max_ms) == (6000, 6000)
    assert tokens.new_token(CONFIG, "User:a", "User:a", [], -1, 0).token_id != t.token_id


def test_renew_period() -> None:
    assert tokens.renew_period_ms(CONFIG, -1) == 10000
    assert tokens.renew_period_ms(CONFIG, 500) == 500
    assert tokens.renew_period_ms(CONFIG, 10**9) == 10000


def test_who_may_request_tokens() -> None:
    plaintext = Connection("p", security_protocol="PLAINTEXT", principal="User:a")
    anonymous_tls = Connection("p", security_protocol="SSL")
    mtls = Connection("p", security_protocol="SSL", principal="User:CN=a")
    sasl = Connection("p", security_protocol="SASL_SSL", principal="User:a")
    sasl.sasl = SaslSession("SASL_SSL", authenticated=True)
    with_token = Connection("p", security_protocol="SASL_SSL", principal="User:a")
    with_token.sasl = SaslSession("SASL_SSL", authenticated=True, token_authenticated=True)
    assert [
        tokens.requests_allowed(c) for c in (plaintext, anonymous_tls, mtls, sasl, with_token)
    ] == [
        False,
        False,
        True,
        True,
        False,
    ]


def test_owner_or_renewer() -> None:
    t = tokens.new_token(CONFIG, "User:a", "User:b", ["User:c"], -1, 0)
    assert all(tokens.owner_or_renewer(t, p) for p in ("User:a", "User:b", "User:c"))
    assert not tokens.owner_or_renewer(t, "User:d")


def test_wire_conversions() -> None:
    assert tokens.milliseconds(datetime.timedelta(milliseconds=-1)) == -1
    assert round(tokens.timestamp(-1).timestamp() * 1000) == -1
    assert round(tokens.timestamp(1712345678901).timestamp() * 1000) == 1712345678901
    assert tokens.split_principal("User:CN=a,O=b") == ("User", "CN=a,O=b")
