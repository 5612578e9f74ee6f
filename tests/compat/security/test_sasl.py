"""SASL on the SASL_PLAINTEXT listener: handshakes, PLAIN and SCRAM logins (wrong passwords,
malformed tokens, nonces and proofs), requests before authentication, session lifetimes,
re-authentication (KIP-368) and session expiry."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from cluster.client_security import ScramClient
from cluster.kafka_client import KafkaConnection
from cluster.polling import wait_for
from tests.compat import diff
from tests.compat.pair import Pair, Side, record
from tests.compat.security.support import (
    ALL_TOPICS,
    API_VERSIONS,
    METADATA,
    REAUTH_MS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SHORT_SESSION_MS,
    Principals,
    logs_in,
    security,
)
from tests.integration.secured_cluster import PASSWORDS, SCRAM


def raw_pair(users: Principals) -> Pair:
    """A pair whose connections are not authenticated (the cases run the exchange by hand)."""
    return Pair(users.kafka, users.rafka)


def unauthenticated(side: Side) -> KafkaConnection:
    return KafkaConnection.to_any(side.bootstrap)


@pytest.mark.parametrize("version", [0, 1])
def test_handshake_unknown_mechanism(users: Principals, version: int) -> None:
    raw_pair(users).call(
        f"SaslHandshake v{version}: GSSAPI (not enabled)",
        SASL_HANDSHAKE,
        version,
        mechanism="GSSAPI",
    )


def authenticate(
    users: Principals,
    case: str,
    mechanism: str,
    *tokens: bytes,
    shape: Callable[[Any], Any] = lambda a: a,
) -> None:
    """Handshake for `mechanism`, then SaslAuthenticate v2 with each token; compares the last
    answer (in the `shape` that keeps what may not differ)."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            assert c.call(SASL_HANDSHAKE, 1, mechanism=mechanism).error_code == ErrorCode.none
            a = None
            for token in tokens:
                a = call_or_closed(c, SASL_AUTHENTICATE, 2, auth_bytes=token)
            answers.append(shape(a))
    pair.compare(case, *answers)


def call_or_closed(c: KafkaConnection, api_key: int, version: int, **fields: Any) -> Any:
    """The answer, or "<connection closed>" when the broker closes the connection instead."""
    try:
        return c.call(api_key, version, **fields)
    except (ConnectionError, OSError):
        return "<connection closed>"


def test_plain_wrong_password(users: Principals) -> None:
    authenticate(users, "SaslAuthenticate PLAIN: a wrong password", "PLAIN", b"\0writer\0nope")


def test_plain_unknown_user(users: Principals) -> None:
    authenticate(users, "SaslAuthenticate PLAIN: an unknown user", "PLAIN", b"\0nobody\0secret")


@pytest.mark.parametrize(
    ("what", "token"),
    [
        ("no NUL separators", b"writer-secret"),
        ("one NUL separator", b"writer\0writer-secret"),
        ("an empty user name", b"\0\0writer-secret"),
        ("an authorization id of another user", b"reader\0writer\0writer-secret"),
        ("an empty token", b""),
    ],
)
def test_plain_malformed(users: Principals, what: str, token: bytes) -> None:
    authenticate(users, f"SaslAuthenticate PLAIN: {what}", "PLAIN", token)


def test_plain_success_session_lifetime(users: Principals) -> None:
    """KIP-368: the session lifetime is connections.max.reauth.ms (masked: compared as set)."""
    authenticate(
        users, "SaslAuthenticate PLAIN: right password", "PLAIN", b"\0writer\0" + b"writer-secret"
    )
    lifetimes = users.writer.both(lambda side: side.conn().session_lifetime_ms)
    record(
        "SaslAuthenticate: session_lifetime_ms is connections.max.reauth.ms",
        str(lifetimes[0]),
        str(lifetimes[1]),
        [] if lifetimes[0] == lifetimes[1] == REAUTH_MS else [f"lifetimes {lifetimes}"],
    )


def scram_first(mechanism: str, user: str, password: str) -> tuple[ScramClient, bytes]:
    client = ScramClient(mechanism, user, password)
    return client, client.first()


def scram_server_first(answer: Any) -> Any:
    """A SCRAM server-first answer with its random parts (nonce, salt) reduced to their shape."""
    if isinstance(answer, str) or answer.error_code != ErrorCode.none:
        return answer
    attrs = dict(kv.split("=", 1) for kv in answer.auth_bytes.decode().split(","))
    return {
        "error_code": answer.error_code.name,
        "error_message": answer.error_message,
        "keys": sorted(attrs),
        "iterations": attrs.get("i"),
        "salt_bytes": len(base64.b64decode(attrs.get("s", ""))),
    }


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("what", ["the right proof", "a wrong proof", "a wrong nonce"])
def test_scram(users: Principals, mechanism: str, what: str) -> None:
    pair = raw_pair(users)
    firsts, finals = [], []
    for side in pair.sides:
        with unauthenticated(side) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism=mechanism)
            client, token = scram_first(mechanism, "writer", PASSWORDS["writer"])
            first = c.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            firsts.append(scram_server_first(first))
            if what == "a wrong proof":
                final = client.final(first.auth_bytes, proof=bytes(len(client.scram.hash(b""))))
            elif what == "a wrong nonce":
                final = client.final(first.auth_bytes, nonce=client.client_nonce + "forged")
            else:
                final = client.final(first.auth_bytes)
            answer = call_or_closed(c, SASL_AUTHENTICATE, 2, auth_bytes=final)
            if what == "the right proof":
                assert answer.error_code == ErrorCode.none
                answer = {
                    "error_code": answer.error_code.name,
                    "verified": client.respond(answer.auth_bytes) is None,
                }
            finals.append(answer)
    pair.compare(f"SaslAuthenticate {mechanism}: server-first message", *firsts)
    pair.compare(f"SaslAuthenticate {mechanism}: {what}", *finals)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_unknown_user(users: Principals, mechanism: str) -> None:
    _, token = scram_first(mechanism, "nobody", "secret")
    authenticate(users, f"SaslAuthenticate {mechanism}: an unknown user", mechanism, token)


@pytest.mark.parametrize(
    ("what", "token"),
    [
        ("a client-first message that is not SCRAM", b"hello"),
        ("channel binding requested", b"p=tls-server-end-point,,n=writer,r=abc"),
        ("an unknown extension", b"n,,n=writer,r=abcdef,ext=1"),
    ],
)
def test_scram_malformed(users: Principals, what: str, token: bytes) -> None:
    authenticate(
        users,
        f"SaslAuthenticate SCRAM-SHA-256: {what}",
        "SCRAM-SHA-256",
        token,
        shape=scram_server_first,
    )


def test_request_before_authentication(users: Principals) -> None:
    """Kafka closes a SASL connection whose first request is neither ApiVersions nor a
    handshake."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            answers.append(call_or_closed(c, METADATA, 12, **ALL_TOPICS))
    pair.compare("Metadata before SaslHandshake", *answers)


def test_request_between_handshake_and_authenticate(users: Principals) -> None:
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            answers.append(call_or_closed(c, METADATA, 12, **ALL_TOPICS))
    pair.compare("Metadata after SaslHandshake, before SaslAuthenticate", *answers)


def test_api_versions_before_authentication(users: Principals) -> None:
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            a = c.call(API_VERSIONS, 3, client_software_name="compat", client_software_version="1")
            answers.append({"error_code": a.error_code.name})
    pair.compare("ApiVersions before SaslHandshake", *answers)


def test_handshake_v0_bare_tokens(users: Principals) -> None:
    """After a v0 handshake the PLAIN token travels bare (no SaslAuthenticate header)."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with unauthenticated(side) as c:
            h = c.call(SASL_HANDSHAKE, 0, mechanism="PLAIN")
            token = b"\0writer\0" + PASSWORDS["writer"].encode()
            c.sock.sendall(len(token).to_bytes(4, "big") + token)
            reply = c.recv_frame()
            m = c.call(METADATA, 12, **ALL_TOPICS)
            answers.append(
                {"handshake": diff.plain(h), "reply": reply.hex(), "brokers": len(m.brokers)}
            )
    pair.compare("SaslHandshake v0 + bare PLAIN token", *answers)


def test_reauthentication_as_another_user(users: Principals) -> None:
    """KIP-368: a re-authentication may not change the principal."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=security("writer")) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            token = b"\0reader\0" + PASSWORDS["reader"].encode()
            answers.append(call_or_closed(c, SASL_AUTHENTICATE, 2, auth_bytes=token))
    pair.compare("SaslAuthenticate: re-authentication as another user", *answers)


def test_reauthentication_with_another_mechanism(users: Principals) -> None:
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=security("writer")) as c:
            answers.append(call_or_closed(c, SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256"))
    pair.compare("SaslHandshake: re-authentication with another mechanism", *answers)


def test_scram_login_of_every_user(users: Principals) -> None:
    """SCRAM users made through AlterUserScramCredentials log in on both."""
    for mechanism in SCRAM:
        outcome = users.pair("reader", mechanism).both(lambda side: logs_in(side.security, side))
        kafka, rafka = map(str, outcome)
        record(
            f"{mechanism} login of a user made by AlterUserScramCredentials",
            kafka,
            rafka,
            [] if outcome == (True, True) else [str(outcome)],
        )


def test_reauthentication_as_the_same_user(users: Principals) -> None:
    """KIP-368: a connection re-authenticates with the same principal; the new session's
    lifetime is connections.max.reauth.ms again."""
    pair = raw_pair(users)
    answers = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=security("writer")) as c:
            c.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
            token = b"\0writer\0" + PASSWORDS["writer"].encode()
            a = c.call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            m = c.call(METADATA, 12, **ALL_TOPICS)
            lifetime = int(a.session_lifetime.total_seconds() * 1000)
            answers.append([diff.plain(a), lifetime == REAUTH_MS, len(m.brokers)])
    pair.compare("SaslAuthenticate: re-authentication as the same user", *answers)


def test_session_expiry_closes_the_connection(users: Principals) -> None:
    """A SCRAM-SHA-512 session lives SHORT_SESSION_MS (the mechanism's own
    connections.max.reauth.ms); a request after it, without re-authenticating, closes the
    connection on both."""
    outcomes = []
    for side in users.pair("reader", "SCRAM-SHA-512").sides:
        with side.fresh() as c:
            lifetime = c.session_lifetime_ms

            def closed(c: KafkaConnection = c) -> bool:
                return call_or_closed(c, METADATA, 12, **ALL_TOPICS) == "<connection closed>"

            wait_for(closed, 30, f"{side.name} closing an expired session", interval=0.2)
            outcomes.append(f"lifetime {lifetime} ms, closed once expired")
    expected = f"lifetime {SHORT_SESSION_MS} ms, closed once expired"
    kafka, rafka = outcomes
    record(
        "SCRAM-SHA-512 session of the mechanism's connections.max.reauth.ms, then closed",
        kafka,
        rafka,
        [] if outcomes == [expected, expected] else [str(outcomes)],
    )
