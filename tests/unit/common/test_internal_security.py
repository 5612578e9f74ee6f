"""Loading the internal credentials (common.internal_security): what is derived from the
secret, what is refused with a message, the files a local cluster gets."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from common.internal_security import (
    InternalSecurity,
    InternalSecurityError,
    local_cluster_credentials,
)
from dataplane.config import BrokerConfig
from meta.config import MetaConfig

SECRET = "0123456789abcdef-cluster"


def load(**settings: str) -> InternalSecurity:
    return InternalSecurity.from_properties({k.replace("_", "."): v for k, v in settings.items()})


def test_nothing_set_is_open() -> None:
    security = load()
    assert security.open
    assert not security.tls
    assert security.raft_password is None
    assert security.describe() == "nothing (open)"


def test_the_secret_gives_distinct_derived_credentials() -> None:
    security = InternalSecurity.from_properties(
        {"internal.secret": SECRET, "security.protocol": "SASL_SSL"}  # others are ignored
    )
    assert not security.open
    assert not security.tls
    assert security.token
    assert security.raft_password
    assert SECRET.encode() not in (security.token, security.raft_password.encode())
    assert security.token.hex() != security.raft_password  # a sniffed token is not the password
    assert load(internal_secret=SECRET).token == security.token  # the same on every member
    assert load(internal_secret=SECRET + "x").token != security.token


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(InternalSecurityError, match="fewer than 16"):
        load(internal_secret="short")


def test_settings_are_part_of_both_configs_and_the_secret_is_not_shown() -> None:
    for config in (MetaConfig.load(None, {"internal.secret": SECRET}),
                   BrokerConfig.load(None, {"internal.secret": SECRET})):  # fmt: skip
        assert InternalSecurity.from_config(config).token == load(internal_secret=SECRET).token
        assert SECRET not in str(config.as_properties())


def test_local_cluster_credentials(tmp_path: Path) -> None:
    properties = local_cluster_credentials(tmp_path, tls=True)
    for path in (tmp_path / "internal.properties", properties["internal.ssl.keystore.location"]):
        assert Path(path).stat().st_mode & 0o777 == 0o600, path
    security = InternalSecurity.from_properties(properties)
    assert security.tls
    assert security.token
    assert security.describe() == ("TLS with client certificates + cluster secret")
    node, _ca = x509.load_pem_x509_certificates(security.certificate_chain)
    sans = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    again = local_cluster_credentials(tmp_path, tls=False)
    assert again["internal.secret"] != properties["internal.secret"]  # fresh every time
    assert "internal.ssl.keystore.location" not in again


def test_tls_needs_both_the_keystore_and_the_truststore(tmp_path: Path) -> None:
    properties = local_cluster_credentials(tmp_path, tls=True)
    with pytest.raises(InternalSecurityError, match=r"internal\.ssl\.truststore"):
        load(internal_ssl_keystore_location=properties["internal.ssl.keystore.location"])
    with pytest.raises(InternalSecurityError, match=r"internal\.ssl\.keystore"):
        load(internal_ssl_truststore_location=properties["internal.ssl.truststore.location"])


def test_unreadable_and_mismatched_keystores_are_refused(tmp_path: Path) -> None:
    properties = local_cluster_credentials(tmp_path, tls=True)
    ca = properties["internal.ssl.truststore.location"]
    with pytest.raises(InternalSecurityError, match="cannot be read"):
        load(internal_ssl_keystore_location=str(tmp_path / "missing.pem"),
             internal_ssl_truststore_location=ca)  # fmt: skip
    pem = Path(properties["internal.ssl.keystore.location"]).read_bytes()
    chain = pem[pem.index(b"-----BEGIN CERTIFICATE") :]
    other_key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(InternalSecurityError, match="does not belong"):
        load(internal_ssl_keystore_certificate_chain=chain.decode(),
             internal_ssl_keystore_key=other_key.decode(),
             internal_ssl_truststore_location=ca)  # fmt: skip
    with pytest.raises(InternalSecurityError, match="no readable PEM certificate"):
        load(internal_ssl_keystore_location=properties["internal.ssl.keystore.location"],
             internal_ssl_truststore_certificates="garbage")  # fmt: skip


def test_an_encrypted_key_is_opened_with_its_password(tmp_path: Path) -> None:
    properties = local_cluster_credentials(tmp_path, tls=True)
    pem = Path(properties["internal.ssl.keystore.location"]).read_bytes()
    split = pem.index(b"-----BEGIN CERTIFICATE")
    key = serialization.load_pem_private_key(pem[:split], None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pass-word"),
    )
    inline = {
        "internal_ssl_keystore_certificate_chain": pem[split:].decode(),
        "internal_ssl_keystore_key": encrypted.decode(),
        "internal_ssl_truststore_location": properties["internal.ssl.truststore.location"],
    }
    with pytest.raises(InternalSecurityError, match=r"internal\.ssl\.key\.password"):
        load(**inline)
    security = load(**inline, internal_ssl_key_password="pass-word")
    assert security.tls
    assert b"ENCRYPTED" not in security.private_key
