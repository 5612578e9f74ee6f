"""SCRAM server side (RFC 5802/7677) against the RFC's test vector and a reference client."""

from __future__ import annotations

import base64
import hashlib
import hmac

import anyio
import pytest

from dataplane.security.sasl import scram
from dataplane.security.sasl.mechanism import SaslFailure
from dataplane.security.sasl.scram import SCRAM_MECHANISMS, ScramServer, parse_client_first
from meta.model import DelegationToken, ScramCredential

SHA256 = SCRAM_MECHANISMS["SCRAM-SHA-256"]
SHA512 = SCRAM_MECHANISMS["SCRAM-SHA-512"]

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def credential(
    mechanism: scram.ScramMechanism,
    password: bytes,
    salt: bytes = b"salt" * 4,
    iterations: int = 4096,
) -> ScramCredential:
    return mechanism.credential(
        mechanism.salted_password(password, salt, iterations), salt, iterations
    )


def server(
    mechanism: scram.ScramMechanism,
    creds: dict[str, ScramCredential],
    tokens: dict[str, tuple[ScramCredential, DelegationToken]] | None = None,
) -> ScramServer:
    return ScramServer(mechanism, creds.get, (tokens or {}).get)


def evaluate(s: ScramServer, message: bytes) -> bytes:
    async def main() -> bytes:
        return await s.evaluate(message)

    return anyio.run(main)


def client_final(
    mechanism: scram.ScramMechanism,
    password: bytes,
    client_first: bytes,
    server_first: bytes,
    nonce: str | None = None,
    gs2: bytes = b"n,,",
) -> bytes:
    """A reference SCRAM client's final message."""
    attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
    salted = mechanism.salted_password(password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = mechanism.hmac(salted, b"Client Key")
    without_proof = f"c={base64.b64encode(gs2).decode()},r={nonce or attrs['r']}"
    bare = client_first.decode().split(",", 2)[2]
    auth = f"{bare},{server_first.decode()},{without_proof}".encode()
    signature = mechanism.hmac(mechanism.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_rfc7677_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda _n: RFC_SERVER_NONCE)
    s = server(SHA256, {"user": credential(SHA256, b"pencil", RFC_SALT)})
    assert evaluate(s, RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert s.identity is None
    assert evaluate(s, RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert s.identity is not None
    assert s.identity.principal == "User:user"
    assert not s.identity.token_authenticated
    assert s.identity.credential_expiry_ms is None


def test_stored_keys_match_the_rfc_definitions() -> None:
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"s", 4096)
    c = credential(SHA512, b"pw", b"s")
    assert (
        c.stored_key == hashlib.sha512(hmac.new(salted, b"Client Key", "sha512").digest()).digest()
    )
    assert c.server_key == hmac.new(salted, b"Server Key", "sha512").digest()


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_round_trip_and_wrong_password(mechanism: scram.ScramMechanism) -> None:
    creds = {"alice": credential(mechanism, b"alice-secret")}
    first = b"n,,n=alice,r=abcdef"
    s = server(mechanism, creds)
    final = evaluate(s, client_final(mechanism, b"alice-secret", first, evaluate(s, first)))
    assert final.startswith(b"v=")
    assert s.identity is not None

    s = server(mechanism, creds)
    wrong = client_final(mechanism, b"guess", first, evaluate(s, first))
    with pytest.raises(SaslFailure) as e:
        evaluate(s, wrong)
    assert "wrong password" in e.value.reason
    assert s.identity is None
    assert "guess" not in e.value.reason  # never a password in a log line


def test_wrong_nonce_and_channel_binding() -> None:
    creds = {"alice": credential(SHA256, b"pw")}
    first = b"n,,n=alice,r=abcdef"
    s = server(SHA256, creds)
    with pytest.raises(SaslFailure, match="nonce"):
        evaluate(s, client_final(SHA256, b"pw", first, evaluate(s, first), nonce="abcdefXYZ"))
    s = server(SHA256, creds)
    with pytest.raises(SaslFailure, match="channel binding"):
        evaluate(s, client_final(SHA256, b"pw", first, evaluate(s, first), gs2=b"y,,"))


def test_unknown_user_and_low_iterations_fail_at_the_first_message() -> None:
    with pytest.raises(SaslFailure, match="no SCRAM-SHA-256 credential"):
        evaluate(server(SHA256, {}), b"n,,n=bob,r=abc")
    weak = {"bob": credential(SHA256, b"pw", iterations=1000)}
    with pytest.raises(SaslFailure, match="iterations"):
        evaluate(server(SHA256, weak), b"n,,n=bob,r=abc")


def test_authzid_must_be_the_user() -> None:
    creds = {"alice": credential(SHA256, b"pw")}
    with pytest.raises(SaslFailure) as e:
        evaluate(server(SHA256, creds), b"n,a=admin,n=alice,r=abc")
    assert e.value.public
    assert "authorization id" in e.value.public
    first = b"n,a=alice,n=alice,r=abc"
    s = server(SHA256, creds)
    evaluate(s, client_final(SHA256, b"pw", first, evaluate(s, first), gs2=b"n,a=alice,"))
    assert s.identity is not None


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\xff\xfe",
        b"garbage",
        b"p=tls-unique,,n=a,r=b",
        b"n,,n=a",
        b"n,,n=a,r=",
        b"n,,m=ext,n=a,r=b",
        b"n,,n=a=41,r=b",
        b"n,x=1,n=a,r=b",
        b"n,,x=a,r=b",
    ],
)
def test_garbage_first_messages_fail_cleanly(message: bytes) -> None:
    with pytest.raises(SaslFailure):
        evaluate(server(SHA256, {"a": credential(SHA256, b"pw")}), message)


@pytest.mark.parametrize("final", [b"", b"c=biws", b"c=biws,r=x", b"c=!!,r=x,p=AA==", b"x,p=AA=="])
def test_garbage_final_messages_fail_cleanly(final: bytes) -> None:
    s = server(SHA256, {"a": credential(SHA256, b"pw")})
    evaluate(s, b"n,,n=a,r=abc")
    with pytest.raises(SaslFailure):
        evaluate(s, final)


def test_escaped_user_names() -> None:
    assert parse_client_first("n,,n=a=2Cb=3Dc,r=x").username == "a,b=c"


def test_token_authentication() -> None:
    token = DelegationToken("tok1", b"\x01" * 64, "User:alice", "User:alice", (), 0, 5000, 9000)
    cred = scram.token_credential(SHA512, token)
    first = b"n,,n=tok1,r=abc,tokenauth=true"
    s = server(SHA512, {}, {"tok1": (cred, token)})
    password = base64.b64encode(token.hmac)
    evaluate(s, client_final(SHA512, password, first, evaluate(s, first)))
    assert s.identity is not None
    assert s.identity.principal == "User:alice"
    assert s.identity.token_authenticated
    assert s.identity.credential_expiry_ms == 5000
    with pytest.raises(SaslFailure, match="unknown or expired"):
        evaluate(server(SHA512, {}), first)
