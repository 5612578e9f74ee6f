"""OAUTHBEARER (RFC 7628): the client message, Kafka's unsecured validator, JWKS validation."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from dataplane.security.sasl.mechanism import SaslFailure
from dataplane.security.sasl.oauthbearer import (
    Claims,
    JwksValidator,
    OAuthBearerServer,
    TokenInvalid,
    UnsecuredValidator,
    parse_initial_response,
)


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def initial(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01ext=1\x01\x01".encode()


def test_parse_initial_response() -> None:
    assert parse_initial_response(initial("abc.def.")) == ("", "abc.def.")
    assert parse_initial_response(initial("a.b.c", "bob")) == ("bob", "a.b.c")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\xff",
        b"n,,auth=Bearer x",
        b"n,,\x01auth=Bearer x\x01",
        b"n,,\x01\x01",
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"y,,\x01auth=Bearer x\x01\x01",
        b"n,b=x,\x01auth=Bearer x\x01\x01",
    ],
)
def test_garbage_initial_responses(message: bytes) -> None:
    with pytest.raises(SaslFailure):
        parse_initial_response(message)


def test_unsecured_validator() -> None:
    now = int(time.time())
    v = UnsecuredValidator({})
    now_ms = now * 1000
    assert v.validate(unsecured({"sub": "alice", "exp": now + 60}), now_ms) == Claims(
        "alice", (now + 60) * 1000
    )
    bad = [
        unsecured({"sub": "alice", "exp": now - 1}),  # expired
        unsecured({"sub": "alice"}),  # no exp
        unsecured({"exp": now + 60}),  # no sub
        unsecured({"sub": "alice", "exp": now + 60, "iat": now + 30}),  # issued in the future
        unsecured({"sub": "alice", "exp": 1e300}),
        unsecured({"sub": "alice", "exp": now + 60}, {"alg": "RS256"}),
        unsecured({"sub": "alice", "exp": now + 60}) + "signature",
        "a.b",
        "!!.??.",
        base64.urlsafe_b64encode(b"[1]").decode() + ".e30.",
    ]
    for token in bad:
        with pytest.raises(TokenInvalid):
            v.validate(token, now_ms)


def test_unsecured_validator_options() -> None:
    now = int(time.time())
    v = UnsecuredValidator(
        {
            "unsecuredValidatorPrincipalClaimName": "user",
            "unsecuredValidatorRequiredScope": "kafka",
            "unsecuredValidatorAllowableClockSkewMs": "5000",
        }
    )
    ok = unsecured({"user": "bob", "exp": now - 2, "scope": "kafka other"})
    assert v.validate(ok, now * 1000).principal == "bob"
    with pytest.raises(TokenInvalid) as e:
        v.validate(unsecured({"user": "bob", "exp": now + 60, "scope": "x"}), now * 1000)
    assert e.value.scope == "kafka"
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def run(server: OAuthBearerServer, message: bytes) -> bytes:
    async def main() -> bytes:
        return await server.evaluate(message)

    return anyio.run(main)


def test_server_success_and_error_challenge() -> None:
    now = int(time.time())
    server = OAuthBearerServer(UnsecuredValidator({}))
    assert run(server, initial(unsecured({"sub": "alice", "exp": now + 60}))) == b""
    assert server.identity is not None
    assert server.identity.principal == "User:alice"
    assert server.identity.credential_expiry_ms == (now + 60) * 1000

    server = OAuthBearerServer(UnsecuredValidator({}))
    challenge = run(server, initial(unsecured({"sub": "alice", "exp": now - 60})))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert server.identity is None
    with pytest.raises(SaslFailure) as e:
        run(server, b"\x01")
    assert e.value.public == challenge.decode()
    assert "expired" in e.value.reason

    server = OAuthBearerServer(UnsecuredValidator({}))
    with pytest.raises(SaslFailure, match="authorization id"):
        run(server, initial(unsecured({"sub": "alice", "exp": now + 60}), authzid="admin"))


class Issuer:
    """Signs JWTs with keys published in a JWKS file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: dict[str, Any] = {}

    def add_key(self, kid: str, key: Any = None) -> None:
        self.keys[kid] = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.publish()

    def publish(self) -> None:
        jwks = []
        for kid, key in self.keys.items():
            algorithm = (
                jwt.algorithms.RSAAlgorithm
                if isinstance(key, rsa.RSAPrivateKey)
                else jwt.algorithms.ECAlgorithm
            )
            jwk = json.loads(algorithm.to_jwk(key.public_key()))
            jwks.append(jwk | {"kid": kid})
        self.path.write_text(json.dumps({"keys": jwks}))

    def token(self, kid: str, alg: str = "RS256", **claims: Any) -> str:
        claims = {
            "sub": "carol",
            "exp": int(time.time()) + 60,
            "aud": "kafka",
            "iss": "https://idp",
        } | claims
        return jwt.encode(claims, self.keys[kid], algorithm=alg, headers={"kid": kid})


def test_jwks_validator(tmp_path: Path) -> None:
    now = int(time.time())
    issuer = Issuer(tmp_path / "jwks.json")
    issuer.add_key("k1")
    issuer.add_key("k2", ec.generate_private_key(ec.SECP256R1()))
    v = JwksValidator(issuer.path.as_uri(), 3600000, ["kafka", "other"], "https://idp", "sub", 30)
    assert v.validate(issuer.token("k1", exp=now + 60)) == Claims("carol", (now + 60) * 1000)
    assert v.validate(issuer.token("k2", alg="ES256")).principal == "carol"
    assert v.validate(issuer.token("k1", exp=now - 10)).principal == "carol"  # within skew
    refused = [
        issuer.token("k1", exp=now - 120),
        issuer.token("k1", nbf=now + 120),
        issuer.token("k1", aud="elsewhere"),
        issuer.token("k1", iss="https://evil"),
        issuer.token("k1", sub=""),
        unsecured({"sub": "carol", "exp": now + 60}, {"alg": "none", "kid": "k1"}),
        jwt.encode(
            {"sub": "x", "exp": now + 60}, "s" * 32, algorithm="HS256", headers={"kid": "k1"}
        ),
        "garbage",
    ]
    for token in refused:
        with pytest.raises(TokenInvalid):
            v.validate(token)
    # A key the issuer rotates in is found without waiting for the refresh interval.
    issuer.add_key("k3")
    with pytest.raises(TokenInvalid, match="no key"):
        v.validate(issuer.token("k3"))  # the set was loaded less than 10 s ago
    v._keys._loaded -= 60
    assert v.validate(issuer.token("k3")).principal == "carol"


def test_jwks_unreachable(tmp_path: Path) -> None:
    now = int(time.time())
    v = JwksValidator((tmp_path / "missing.json").as_uri(), 1000, [], "", "sub", 0)
    with pytest.raises(TokenInvalid, match="cannot load the JWKS"):
        v.validate(jwt.encode({"sub": "x", "exp": now + 60}, "k" * 32, algorithm="HS256"))
