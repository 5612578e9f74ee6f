"""The client side of Kafka's security: what `rafka` admin commands (and raw-protocol tests) need
to talk to a secured listener, configured as Kafka's tools are, with a client `.properties` file
(`--command-config`): `security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
`ssl.truststore.*`, `ssl.keystore.*`.

The SASL exchanges are small state machines independent of sockets: `KafkaConnection` runs them
over SaslHandshake/SaslAuthenticate, tests drive them by hand to send wrong nonces or proofs.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import secrets
import ssl
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from common.settings import parse_properties
from dataplane.security.sasl.jaas import JaasConfigError, parse_jaas_config
from dataplane.security.sasl.scram import SCRAM_MECHANISMS

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SecurityConfigError(ValueError):
    """Client security settings that cannot work; the message says which and why."""


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connects: TLS or not, SASL mechanism and credentials (Kafka's names in
    `from_properties`). Empty strings mean "not set"."""

    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    username: str = ""
    password: str = ""
    tokenauth: bool = False  # SCRAM with a delegation token (id, HMAC) instead of a password
    token: str = ""  # OAUTHBEARER: the JWT sent as is
    ca_file: str = ""  # PEM CAs to trust; none: the system's
    ca_pem: str = ""
    cert_file: str = ""  # client certificate chain (mTLS), PEM; may hold the key too
    key_file: str = ""
    cert_pem: str = ""  # or the chain and key inline
    key_password: str = ""
    check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SecurityConfigError(
                f"security.protocol={self.protocol!r}: expected one of {', '.join(PROTOCOLS)}"
            )
        if self.sasl and self.mechanism not in MECHANISMS:
            raise SecurityConfigError(
                f"sasl.mechanism={self.mechanism or '(unset: GSSAPI)'} is not supported; use "
                f"one of {', '.join(MECHANISMS)}"
            )
        if self.tokenauth and self.mechanism not in SCRAM_MECHANISMS:
            raise SecurityConfigError("tokenauth=true needs a SCRAM mechanism")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file or None, cadata=self.ca_pem or None)
        ctx.check_hostname = self.check_hostname
        password = self.key_password.encode() or None
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file or None, password)
        elif self.cert_pem:  # ssl loads chains from files only: a private one, for a moment
            with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
                f.write(self.cert_pem)
                f.flush()
                ctx.load_cert_chain(f.name, None, password)
        return ctx

    def mechanism_client(self) -> SaslClient:
        """A fresh SASL exchange for one connection."""
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        if self.mechanism == "OAUTHBEARER":
            return OAuthBearerClient(self.token)
        return ScramClient(self.mechanism, self.username, self.password, self.tokenauth)

    @classmethod
    def from_properties(cls, props: dict[str, str], base_dir: Path | None = None) -> ClientSecurity:
        """Kafka client settings (`--command-config`) -> ClientSecurity. Raises
        SecurityConfigError naming the setting that is wrong or missing."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        mechanism = props.get("sasl.mechanism", "").strip().upper()
        fields: dict = {"protocol": protocol, "mechanism": mechanism}
        if protocol.startswith("SASL_"):
            cls(protocol, mechanism)  # says what is wrong with these two first
            fields |= _sasl_fields(mechanism, props)
        if protocol.endswith("SSL"):
            fields |= _ssl_fields(props, base_dir or Path.cwd())
        return cls(**fields)

    @classmethod
    def from_file(cls, path: Path) -> ClientSecurity:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise SecurityConfigError(f"cannot read the command config {path}: {e}") from None
        return cls.from_properties(parse_properties(text), Path(path).parent)


def _sasl_fields(mechanism: str, props: dict[str, str]) -> dict:
    jaas = props.get("sasl.jaas.config", "")
    if not jaas:
        raise SecurityConfigError(f"sasl.jaas.config is needed for SASL ({mechanism})")
    module, options = parse_jaas(jaas)
    if mechanism != "OAUTHBEARER":
        if "username" not in options or "password" not in options:
            raise SecurityConfigError(f"sasl.jaas.config ({module}) needs username and password")
        return {
            "username": options["username"],
            "password": options["password"],
            "tokenauth": options.get("tokenauth", "").lower() == "true",
        }
    return {"token": oauth_token(options, props)}


def _ssl_fields(props: dict[str, str], base_dir: Path) -> dict:
    def path(key: str) -> str:
        value = props.get(key, "")
        return str((base_dir / value).resolve()) if value else ""

    for kind in ("truststore", "keystore"):
        stype = props.get(f"ssl.{kind}.type", "PEM").upper()
        if stype != "PEM" and props.get(f"ssl.{kind}.location"):
            raise SecurityConfigError(
                f"ssl.{kind}.type={stype} is not supported: convert the store to PEM and set "
                f"ssl.{kind}.type=PEM"
            )
    fields: dict = {
        "ca_file": path("ssl.truststore.location"),
        "ca_pem": pem(props.get("ssl.truststore.certificates", "")),
        "key_password": props.get("ssl.key.password", ""),
        "check_hostname": props.get("ssl.endpoint.identification.algorithm", "https") != "",
    }
    if props.get("ssl.keystore.location"):
        fields["cert_file"] = path("ssl.keystore.location")  # PEM: key and chain in one file
    elif props.get("ssl.keystore.certificate.chain"):
        fields["cert_pem"] = pem(
            props["ssl.keystore.certificate.chain"] + props.get("ssl.keystore.key", "")
        )
    return fields


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def pem(text: str) -> str:
    """Inline PEM as a .properties file carries it (continued lines joined, so the line
    breaks are gone) back into PEM blocks OpenSSL reads."""
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text):
        data = "".join(body.split())
        lines = "\n".join(data[i : i + 64] for i in range(0, len(data), 64))
        blocks.append(f"-----BEGIN {kind}-----\n{lines}\n-----END {kind}-----\n")
    return "".join(blocks)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`module.Name required key="value" ...;` -> (module name, options), with the broker's
    JAAS parser."""
    try:
        modules = parse_jaas_config(text if text.rstrip().endswith(";") else text + ";")
    except JaasConfigError as e:
        raise SecurityConfigError(f"sasl.jaas.config: {e}") from None
    if len(modules) != 1:
        raise SecurityConfigError(f"sasl.jaas.config has {len(modules)} login modules, not 1")
    return modules[0].class_name, modules[0].options


def oauth_token(options: dict[str, str], props: dict[str, str]) -> str:
    """The JWT an OAUTHBEARER client sends, found as Kafka's clients find it: a token endpoint
    (`sasl.oauthbearer.token.endpoint.url`, https with client credentials, or a file), or
    Kafka's unsecured login (`unsecuredLoginStringClaim_sub`, development only)."""
    url = props.get("sasl.oauthbearer.token.endpoint.url", "")
    if url.startswith("file:"):
        return Path(urllib.parse.urlparse(url).path).read_text().strip()
    if url:
        body = {"grant_type": "client_credentials"}
        if options.get("scope"):
            body["scope"] = options["scope"]
        basic = base64.b64encode(
            f"{options.get('clientId', '')}:{options.get('clientSecret', '')}".encode()
        ).decode()
        request = urllib.request.Request(
            url,
            urllib.parse.urlencode(body).encode(),
            {"Authorization": f"Basic {basic}"},
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            return str(json.load(r)["access_token"])
    if "unsecuredLoginStringClaim_sub" in options:
        return unsecured_jwt(options["unsecuredLoginStringClaim_sub"])
    raise SecurityConfigError(
        "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (https:// or file:) or "
        "unsecuredLoginStringClaim_sub in sasl.jaas.config"
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(sub: str, lifetime_s: int = 3600) -> str:
    """An unsigned JWT (alg none), as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes."""
    now = int(time.time())
    header = _b64url(json.dumps({"alg": "none"}).encode())
    claims = _b64url(json.dumps({"sub": sub, "iat": now, "exp": now + lifetime_s}).encode())
    return f"{header}.{claims}."


# ---------------------------------------------------------------- SASL mechanisms, client side


class SaslFailed(Exception):
    """The server's answer breaks the mechanism (e.g. a SCRAM server signature that does not
    verify): the client must not trust this connection."""


class SaslClient:
    """One SASL exchange: `first()` is the first token; `respond(challenge)` answers each
    server token and returns None once the client has nothing more to send."""

    def first(self) -> bytes:
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        return None


class PlainClient(SaslClient):
    def __init__(self, username: str, password: str) -> None:
        self.username, self.password = username, password

    def first(self) -> bytes:
        return f"\0{self.username}\0{self.password}".encode()


class OAuthBearerClient(SaslClient):
    """RFC 7628: the token in the client's first message; an error challenge from the server
    (JSON) is answered with the single byte 0x01, after which the server fails the exchange."""

    def __init__(self, token: str) -> None:
        self.token = token

    def first(self) -> bytes:
        return f"n,,\x01auth=Bearer {self.token}\x01\x01".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        return b"\x01" if challenge else None


def scram_name(name: str) -> str:
    """RFC 5802 saslname: '=' and ',' escaped."""
    return name.replace("=", "=3D").replace(",", "=2C")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """SCRAM's Hi(): PBKDF2 with the mechanism's hash (what API 51 upserts carry)."""
    return SCRAM_MECHANISMS[mechanism].salted_password(password.encode(), salt, iterations)


class ScramClient(SaslClient):
    """RFC 5802/7677 client. `nonce` and `proof` may be replaced between steps (tests send
    wrong ones on purpose)."""

    def __init__(
        self, mechanism: str, username: str, password: str, tokenauth: bool = False
    ) -> None:
        self.scram = SCRAM_MECHANISMS[mechanism]
        self.username, self.password = username, password
        self.extensions = ",tokenauth=true" if tokenauth else ""
        self.client_nonce = secrets.token_urlsafe(24)
        # The extensions belong to the bare message, hence to the AuthMessage (RFC 5802)
        self.client_first_bare = f"n={scram_name(username)},r={self.client_nonce}{self.extensions}"
        self._server_signature = b""
        self._done = False

    def first(self) -> bytes:
        return f"n,,{self.client_first_bare}".encode()

    def final(self, server_first: bytes, nonce: str | None = None, proof: bytes | None = None):
        """The client-final message for `server_first`; `nonce`/`proof` override the right
        ones (hostile-input tests)."""
        attrs = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        if not attrs.get("r", "").startswith(self.client_nonce):
            raise SaslFailed("the server's nonce does not extend ours")
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = self.scram.salted_password(self.password.encode(), salt, iterations)
        client_key = self.scram.hmac(salted, b"Client Key")
        stored_key = self.scram.hash(client_key)
        without_proof = f"c=biws,r={attrs['r'] if nonce is None else nonce}"
        auth_message = f"{self.client_first_bare},{server_first.decode()},{without_proof}"
        signature = self.scram.hmac(stored_key, auth_message.encode())
        real_proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self.scram.hmac(salted, b"Server Key")
        self._server_signature = self.scram.hmac(server_key, auth_message.encode())
        p = real_proof if proof is None else proof
        return f"{without_proof},p={base64.b64encode(p).decode()}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if not self._server_signature:
            return self.final(challenge)
        if self._done:
            return None
        self._done = True
        attrs = dict(kv.split("=", 1) for kv in challenge.decode().split(","))
        if "e" in attrs:
            raise SaslFailed(f"SCRAM server error: {attrs['e']}")
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")), self._server_signature):
            raise SaslFailed("the server's SCRAM signature does not verify: not the real server")
        return None
