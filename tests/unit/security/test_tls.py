"""TLS contexts from Kafka's ssl.* settings (per listener), checked with in-memory handshakes."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from common import dev_ca
from dataplane.config import BrokerConfig
from dataplane.security.tls import (
    ServerTls,
    TlsConfigError,
    build_server_context,
    client_auth,
    openssl_cipher_list,
)


def _config(**values: str) -> BrokerConfig:
    return BrokerConfig.load(None, values)


def _handshake(server: ssl.SSLContext, ca: Path, client_cert: Path | None = None) -> bytes | None:
    """Run a TLS handshake in memory; the server's view of the client certificate (DER)."""
    client = ssl.create_default_context(cafile=str(ca))
    if client_cert is not None:
        client.load_cert_chain(client_cert)
    to_client, to_server = ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(to_client, to_server, server_hostname="localhost")
    s = server.wrap_bio(to_server, to_client, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, end in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done.values()):
            break
    # TLS 1.3: the client learns of a refused certificate only when it reads
    s.write(b"x")
    assert c.read(1) == b"x"
    return s.getpeercert(binary_form=True)


@pytest.fixture
def tls(tmp_path: Path) -> Path:
    directory = tmp_path / "tls"
    dev_ca.ensure_broker_certificate(directory, 1)
    return directory


def test_keystore_file_serves_the_certificate(tls: Path) -> None:
    ctx = build_server_context(
        _config(**{"ssl.keystore.location": str(tls / "broker-1.pem")}), "SSL", "SSL"
    )
    assert _handshake(ctx, tls / "ca.pem") is None  # no client auth by default


def test_listener_prefix_wins_over_the_broker_wide_setting(tls: Path) -> None:
    config = _config(
        **{
            "ssl.keystore.location": "/nonexistent.pem",
            "listener.name.external.ssl.keystore.location": str(tls / "broker-1.pem"),
        }
    )
    _handshake(build_server_context(config, "EXTERNAL", "SSL"), tls / "ca.pem")
    with pytest.raises(TlsConfigError, match="listener SSL"):
        build_server_context(config, "SSL", "SSL")


def test_inline_pem_chain_and_encrypted_key(tls: Path) -> None:
    text = (tls / "broker-1.pem").read_bytes()
    key = serialization.load_pem_private_key(text, None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    ).decode()
    chain = text.decode()[text.decode().index("-----BEGIN CERTIFICATE") :]
    config = _config(
        **{
            # as a properties file carries it: one line, newlines escaped
            "ssl.keystore.certificate.chain": chain.replace("\n", "\\n"),
            "ssl.keystore.key": encrypted.replace("\n", " "),
            "ssl.key.password": "s3cret",
        }
    )
    _handshake(build_server_context(config, "SSL", "SSL"), tls / "ca.pem")
    with pytest.raises(TlsConfigError):
        build_server_context(config.model_copy(update={"ssl_key_password": "wrong"}), "SSL", "SSL")


def test_client_certificate_required_and_its_principal(tls: Path) -> None:
    client = dev_ca.issue_certificate(tls, "alice.pem", "alice", server=False)
    config = _config(
        **{
            "ssl.keystore.location": str(tls / "broker-1.pem"),
            "ssl.truststore.certificates": (tls / "ca.pem").read_text(),
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/L",
        }
    )
    server = ServerTls(config, "SSL", "SSL")
    assert server.context.verify_mode == ssl.CERT_REQUIRED
    der = _handshake(server.context, tls / "ca.pem", client)
    assert der is not None
    assert server.principal(der) == "User:alice"
    with pytest.raises(ssl.SSLError):  # no certificate: refused
        _handshake(server.context, tls / "ca.pem")


def test_client_auth_values_and_sasl_ssl_takes_only_the_listener_prefix() -> None:
    config = _config(**{"ssl.client.auth": "requested"})
    assert client_auth(config, "SSL", "SSL") == "requested"
    assert client_auth(config, "SASL_SSL", "SASL_SSL") == "none"
    prefixed = _config(**{"listener.name.sasl_ssl.ssl.client.auth": "required"})
    assert client_auth(prefixed, "SASL_SSL", "SASL_SSL") == "required"
    with pytest.raises(TlsConfigError, match=r"use required\|requested\|none"):
        client_auth(_config(**{"ssl.client.auth": "always"}), "SSL", "SSL")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "set ssl.keystore.location"),
        ({"ssl.keystore.type": "JKS"}, "only PEM"),
        ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "unknown SSLv3"),
        ({"ssl.cipher.suites": "NO-SUCH-CIPHER"}, "no usable suite"),
    ],
)
def test_bad_settings_say_what_to_fix(tls: Path, settings: dict[str, str], message: str) -> None:
    keystore = {} if not settings else {"ssl.keystore.location": str(tls / "broker-1.pem")}
    with pytest.raises(TlsConfigError, match=message):
        build_server_context(_config(**keystore, **settings), "SSL", "SSL")


def test_enabled_protocols_bound_the_versions(tls: Path) -> None:
    ctx = build_server_context(
        _config(
            **{
                "ssl.keystore.location": str(tls / "broker-1.pem"),
                "ssl.enabled.protocols": "TLSv1.3",
            }
        ),
        "SSL",
        "SSL",
    )
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3


def test_iana_cipher_suite_names_become_openssl_names() -> None:
    assert openssl_cipher_list(
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,"
        "TLS_RSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,TLS_AES_128_GCM_SHA256,"
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    ) == (
        "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:AES128-SHA:"
        "ECDHE-RSA-AES128-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256"
    )


def test_reload_picks_up_a_new_certificate_and_keeps_the_old_on_a_broken_one(tls: Path) -> None:
    keystore = tls / "broker-1.pem"
    server = ServerTls(_config(**{"ssl.keystore.location": str(keystore)}), "SSL", "SSL")
    first = server.context
    assert not server.reload_if_changed()
    dev_ca.issue_certificate(tls, keystore.name, "broker-1-renewed", server=True)
    assert server.reload_if_changed()
    assert server.context is not first
    renewed = server.context
    keystore.write_text("not a certificate")
    assert not server.reload_if_changed()
    assert server.context is renewed
