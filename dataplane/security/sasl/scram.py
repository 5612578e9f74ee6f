"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as Kafka's
ScramSaslServer: credentials are salted keys (never passwords), and the ``tokenauth=true``
extension authenticates with a delegation token (token id as user name, its HMAC as password).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from dataplane.security.sasl.mechanism import Identity, SaslFailure
from meta.model import DelegationToken, ScramCredential

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS
TOKEN_ITERATIONS = 4096  # of the credential derived from a delegation token's HMAC


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # "SCRAM-SHA-256"
    hash_name: str  # hashlib name
    type_code: int  # Kafka's ScramMechanism type, the int8 of APIs 50 and 51

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)

    def credential(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        """The stored credential (RFC 5802 section 3): StoredKey = H(HMAC(SaltedPassword,
        "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(
            salt=salt,
            stored_key=self.hash(client_key),
            server_key=self.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )


SCRAM_MECHANISMS = {
    m.name: m
    for m in (
        ScramMechanism("SCRAM-SHA-256", "sha256", 1),
        ScramMechanism("SCRAM-SHA-512", "sha512", 2),
    )
}
SCRAM_BY_TYPE = {m.type_code: m for m in SCRAM_MECHANISMS.values()}


def token_credential(mechanism: ScramMechanism, token: DelegationToken) -> ScramCredential:
    """The credential a delegation token authenticates with: its password is the HMAC in
    base64, as Kafka's DelegationTokenManager derives it (with a fresh salt)."""
    salt = secrets.token_bytes(16)
    password = base64.b64encode(token.hmac)
    return mechanism.credential(
        mechanism.salted_password(password, salt, TOKEN_ITERATIONS), salt, TOKEN_ITERATIONS
    )


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SaslFailure(f"{what} is not base64") from None


def _sasl_name(text: str) -> str:
    """RFC 5802 saslname: ',' and '=' are sent as '=2C' and '=3D'; any other '=' is invalid."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            escape = text[i : i + 3]
            if escape not in ("=2C", "=3D"):
                raise SaslFailure(f"invalid escape {escape!r} in SCRAM user name")
            out.append("," if escape == "=2C" else "=")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _printable_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str  # "n,," or "n,a=alice," — what the final message's c= must carry
    authzid: str
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str  # client-first-message-bare, part of the AuthMessage


def parse_client_first(message: str) -> ClientFirst:
    parts = message.split(",")
    if len(parts) < 4:
        raise SaslFailure("SCRAM client-first message has too few attributes")
    cbind, authz, *bare_parts = parts
    if cbind not in ("n", "y"):
        raise SaslFailure(f"SCRAM channel binding {cbind!r} is not supported (only 'n' or 'y')")
    if authz and not authz.startswith("a="):
        raise SaslFailure("SCRAM client-first message has a malformed authzid")
    if bare_parts[0].startswith("m="):
        raise SaslFailure("SCRAM mandatory extensions (m=) are not supported")
    user, nonce, *extensions = bare_parts
    if not user.startswith("n=") or not nonce.startswith("r="):
        raise SaslFailure("SCRAM client-first message lacks n= or r=")
    if not _printable_nonce(nonce[2:]):
        raise SaslFailure("SCRAM client nonce is empty or not printable")
    ext: dict[str, str] = {}
    for item in extensions:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SaslFailure("SCRAM client-first message has a malformed extension")
        ext[key] = value
    return ClientFirst(
        gs2_header=f"{cbind},{authz},",
        authzid=_sasl_name(authz[2:]) if authz else "",
        username=_sasl_name(user[2:]),
        nonce=nonce[2:],
        extensions=ext,
        bare=",".join(bare_parts),
    )


CredentialLookup = Callable[[str], ScramCredential | None]
TokenLookup = Callable[[str], tuple[ScramCredential, DelegationToken] | None]


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(
        self, mechanism: ScramMechanism, credential: CredentialLookup, token: TokenLookup
    ) -> None:
        self._mechanism = mechanism
        self._lookup_credential = credential
        self._lookup_token = token
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self._identity: Identity | None = None
        self.identity: Identity | None = None

    async def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise SaslFailure("SCRAM message is not UTF-8") from None
        if self._first is None:
            return self._client_first(message)
        return self._client_final(message)

    def _client_first(self, message: str) -> bytes:
        first = self._first = parse_client_first(message)
        if first.extensions.get("tokenauth", "").lower() == "true":
            found = self._lookup_token(first.username)
            if found is None:
                raise SaslFailure(
                    f"delegation token {first.username!r} is unknown or expired", public=None
                )
            self._credential, t = found
            self._identity = Identity(t.owner, t.expiry_ms, token_authenticated=True)
        else:
            self._credential = self._lookup_credential(first.username)
            if self._credential is None:
                raise SaslFailure(
                    f"user {first.username!r} has no {self._mechanism.name} credential"
                )
            self._identity = Identity(f"User:{first.username}")
        if first.authzid and first.authzid != first.username:
            raise SaslFailure(
                f"user {first.username!r} asked for authorization id {first.authzid!r}",
                public="Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        if self._credential.iterations < MIN_ITERATIONS:
            raise SaslFailure(
                f"the {self._mechanism.name} credential of {first.username!r} has "
                f"{self._credential.iterations} iterations, below the minimum {MIN_ITERATIONS}"
            )
        self._nonce = first.nonce + secrets.token_urlsafe(24)
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        first, credential = self._first, self._credential
        if first is None or credential is None or self.identity is not None:
            raise SaslFailure("SCRAM message after the exchange ended")
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        attrs = without_proof.split(",")
        if (
            not sep
            or len(attrs) < 2
            or not attrs[0].startswith("c=")
            or not attrs[1].startswith("r=")
        ):
            raise SaslFailure("malformed SCRAM client-final message")
        if _b64decode(attrs[0][2:], "SCRAM channel binding") != first.gs2_header.encode():
            raise SaslFailure("SCRAM channel binding does not repeat the gs2 header")
        if not hmac.compare_digest(attrs[1][2:].encode(), self._nonce.encode()):
            raise SaslFailure("invalid nonce in the SCRAM client-final message")
        proof = _b64decode(proof_b64, "SCRAM client proof")
        m = self._mechanism
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        client_signature = m.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature) or not hmac.compare_digest(
            m.hash(bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))),
            credential.stored_key,
        ):
            raise SaslFailure(f"invalid {m.name} proof for {first.username!r} (wrong password)")
        server_signature = m.hmac(credential.server_key, auth_message)
        self.identity = self._identity
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)
