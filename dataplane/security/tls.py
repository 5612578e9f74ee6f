"""Server TLS contexts from Kafka's ``ssl.*`` settings, resolved per listener, reloaded on change.

Only PEM stores, as Kafka's ``ssl.keystore.type=PEM``: a keystore file holding the private key
and the certificate chain (``ssl.keystore.location``) or both inline
(``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``); CAs from ``ssl.truststore.location``
or inline ``ssl.truststore.certificates``. A new certificate written over the files is picked
up by new connections within a few seconds, without a restart (live connections keep theirs).
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from dataplane.security.ssl_principal import SslPrincipalMapper

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig

log = logging.getLogger("rafka.tls")

RELOAD_CHECK_S = 2.0  # how often the store files' modification is checked
_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
# IANA (Java) TLS 1.2 suite names, TLS_<kx>_WITH_<cipher>_<mac>, as OpenSSL spells them
_IANA_SUITE = re.compile(r"^TLS_(?:(\w+?)_)?WITH_(AES_\d+|CHACHA20|[A-Z0-9]+?)_(\w+?)_(SHA\d*)$")


class TlsConfigError(ValueError):
    """The ssl.* settings of a listener cannot make a TLS context."""


def _setting(config: BrokerConfig, listener: str, name: str) -> str:
    return config.listener_value(listener, name).strip()


def client_auth(config: BrokerConfig, listener: str, security_protocol: str) -> str:
    """ssl.client.auth on a listener. On SASL_SSL only a listener-prefixed value counts (the
    client authenticates with SASL), as Kafka does since KIP-684."""
    if security_protocol == "SASL_SSL":
        value = config.prefixed.get(f"listener.name.{listener.lower()}.ssl.client.auth", "none")
    else:
        value = _setting(config, listener, "ssl.client.auth")
    value = value.strip().lower() or "none"
    if value not in _CLIENT_AUTH:
        raise TlsConfigError(
            f"ssl.client.auth={value!r} on {listener}: use required|requested|none"
        )
    return value


def watched_files(config: BrokerConfig, listener: str) -> list[Path]:
    """The store files of a listener, whose change triggers a reload."""
    names = ("ssl.keystore.location", "ssl.truststore.location")
    return [Path(v) for v in (_setting(config, listener, n) for n in names) if v]


def build_server_context(
    config: BrokerConfig, listener: str, security_protocol: str
) -> ssl.SSLContext:
    """The TLS context of one listener; TlsConfigError says which setting is wrong."""
    try:
        return _build(config, listener, security_protocol)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"TLS settings of listener {listener}: {e}") from e


def _build(config: BrokerConfig, listener: str, security_protocol: str) -> ssl.SSLContext:
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if _setting(config, listener, kind).upper() not in ("", "PEM"):
            raise TlsConfigError(f"{kind} on {listener}: only PEM is supported")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, config, listener)
    auth = _CLIENT_AUTH[client_auth(config, listener, security_protocol)]
    if auth != ssl.CERT_NONE:
        truststore = _setting(config, listener, "ssl.truststore.location")
        inline = _setting(config, listener, "ssl.truststore.certificates")
        if truststore:
            ctx.load_verify_locations(cafile=truststore)
        elif inline:
            ctx.load_verify_locations(cadata=_pem(inline, "ssl.truststore.certificates"))
        else:
            log.warning(
                "listener %s checks client certificates but has no ssl.truststore.location: "
                "trusting the system CAs",
                listener,
            )
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = auth
    _set_protocols(ctx, listener, _setting(config, listener, "ssl.enabled.protocols"))
    suites = _setting(config, listener, "ssl.cipher.suites")
    if suites:
        try:
            ctx.set_ciphers(openssl_cipher_list(suites))
        except ssl.SSLError as e:
            raise TlsConfigError(
                f"ssl.cipher.suites on {listener}: no usable suite in {suites!r}"
            ) from e
    return ctx


def _load_keystore(ctx: ssl.SSLContext, config: BrokerConfig, listener: str) -> None:
    location = _setting(config, listener, "ssl.keystore.location")
    chain = _setting(config, listener, "ssl.keystore.certificate.chain")
    key = _setting(config, listener, "ssl.keystore.key")
    password = config.listener_value(listener, "ssl.key.password") or None
    if location:
        ctx.load_cert_chain(location, password=password)
        return
    if not (chain and key):
        raise TlsConfigError(
            f"listener {listener} uses TLS but has no certificate: set ssl.keystore.location "
            "(a PEM file with the key and the chain) or ssl.keystore.certificate.chain and "
            f"ssl.keystore.key (optionally as listener.name.{listener.lower()}.ssl.*)"
        )
    # The ssl module loads keys from files only: a private file that lives for the call.
    with tempfile.TemporaryDirectory(prefix="rafka-tls-") as tmp:
        path = Path(tmp) / "keystore.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_pem(key, "ssl.keystore.key") + _pem(chain, "ssl.keystore.certificate.chain"))
        ctx.load_cert_chain(path, password=password)


def _pem(text: str, setting: str) -> str:
    """Inline PEM as properties files carry it (on one line, newlines escaped or not): each
    block's base64 rewrapped, as Kafka's PEM parser ignores whitespace in it."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text.replace("\\n", "\n")):
        body = "".join(body.split())
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise TlsConfigError(f"{setting} holds no PEM block (-----BEGIN ...-----)")
    return "\n".join(blocks) + "\n"


def _set_protocols(ctx: ssl.SSLContext, listener: str, value: str) -> None:
    names = [v.strip() for v in value.split(",") if v.strip()] or ["TLSv1.2", "TLSv1.3"]
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown:
        raise TlsConfigError(
            f"ssl.enabled.protocols on {listener}: unknown {', '.join(unknown)}; "
            f"use {', '.join(_VERSIONS)}"
        )
    versions = sorted(_VERSIONS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def openssl_cipher_list(suites: str) -> str:
    """Kafka's ssl.cipher.suites (IANA names as Java has them, or OpenSSL names) as an OpenSSL
    cipher list. TLS 1.3 suites are left out: OpenSSL enables them all, Python cannot choose."""
    out = []
    for name in (s.strip() for s in suites.split(",")):
        if not name or name.startswith(("TLS_AES_", "TLS_CHACHA20_")):
            continue
        m = _IANA_SUITE.match(name)
        if m is None:
            out.append(name)  # an OpenSSL name
            continue
        kx, cipher, mode, mac = m.groups()
        cipher = cipher.replace("_", "")  # AES_256 -> AES256
        parts = [] if kx in (None, "RSA") else kx.split("_")  # plain RSA has no prefix
        if cipher == "CHACHA20":
            parts += ["CHACHA20", mode]  # the AEAD names no MAC
        elif mode == "CBC":
            parts += [cipher, mac]  # TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: ECDHE-RSA-AES128-SHA256
        else:
            parts += [cipher, mode, mac]
        out.append("-".join(parts))
    return ":".join(out)


class ServerTls:
    """A listener's current TLS context (`watch` swaps it when the store files change) and how
    its client certificates name principals."""

    def __init__(self, config: BrokerConfig, listener: str, security_protocol: str) -> None:
        self._config, self.listener, self._protocol = config, listener, security_protocol
        self._files = watched_files(config, listener)
        self._stamp = self._stamps()
        self.context = build_server_context(config, listener, security_protocol)
        self.client_auth = client_auth(config, listener, security_protocol) != "none"
        try:
            self._mapper = SslPrincipalMapper(
                config.listener_value(listener, "ssl.principal.mapping.rules")
            )
        except ValueError as e:
            raise TlsConfigError(f"listener {listener}: {e}") from e

    def principal(self, certificate_der: bytes) -> str:
        """``User:<subject as mapped>``; NoMatchingRule when no mapping rule applies."""
        return self._mapper.principal(certificate_der)

    def _stamps(self) -> tuple[tuple[int, int, int], ...]:
        stamps = []
        for path in self._files:
            try:
                st = path.stat()
            except OSError:
                stamps.append((0, 0, 0))
            else:
                stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(stamps)

    def reload_if_changed(self) -> bool:
        """Rebuild the context if a store file changed; a broken new store keeps the old
        context (and says so), so a half-written file never takes the listener down."""
        stamp = self._stamps()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            self.context = build_server_context(self._config, self.listener, self._protocol)
        except TlsConfigError as e:
            log.error(
                "listener %s: the changed certificate files cannot be used (%s); still serving "
                "the previous certificate — fix the files and they are read again",
                self.listener,
                e,
            )
            return False
        log.info(
            "listener %s: reloaded its certificates from %s",
            self.listener,
            ", ".join(map(str, self._files)),
        )
        return True

    async def watch(self, interval: float = RELOAD_CHECK_S) -> None:
        """Check the files every `interval` seconds until cancelled."""
        if not self._files:
            return  # inline PEM: nothing to watch
        while True:
            await anyio.sleep(interval)
            self.reload_if_changed()
