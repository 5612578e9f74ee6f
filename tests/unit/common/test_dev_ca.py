"""The development CA and the TLS settings `rafka up --security-protocol` writes."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509

from cluster.local import LocalCluster
from common import dev_ca
from common.settings import parse_properties


def _certificates(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(path.read_bytes())


def test_broker_certificate_names_loopback_and_chains_to_the_ca(tmp_path: Path) -> None:
    pem = dev_ca.ensure_broker_certificate(tmp_path, 2)
    leaf, ca = _certificates(pem)
    assert ca == _certificates(tmp_path / dev_ca.CA_FILE)[0]
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600  # it holds the key


def test_ca_and_certificates_are_kept_across_runs(tmp_path: Path) -> None:
    first = dev_ca.ensure_broker_certificate(tmp_path, 1).read_bytes()
    ca = (tmp_path / dev_ca.CA_FILE).read_bytes()
    assert dev_ca.ensure_broker_certificate(tmp_path, 1).read_bytes() == first
    assert (tmp_path / dev_ca.CA_FILE).read_bytes() == ca


def _broker_properties(cluster: LocalCluster) -> dict[str, str]:
    return parse_properties(cluster.nodes["broker-1"].config_file.read_text())


def test_ssl_cluster_uses_the_protocol_as_listener_name_and_the_dev_ca(tmp_path: Path) -> None:
    cluster = LocalCluster(1, 1, tmp_path, 20000, security_protocol="ssl")
    props = _broker_properties(cluster)
    assert props["listeners"] == "SSL://127.0.0.1:20000"
    assert props["ssl.keystore.location"] == str(tmp_path.resolve() / "tls" / "broker-1.pem")
    assert cluster.ca_path == tmp_path.resolve() / "tls" / "ca.pem"
    assert cluster.client_config == {
        "bootstrap.servers": "127.0.0.1:20000",
        "security.protocol": "SSL",
        "ssl.ca.location": str(cluster.ca_path),
    }


def test_own_keystore_and_listener_settings_pass_through(tmp_path: Path) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
    cluster = LocalCluster(
        1,
        1,
        tmp_path,
        20000,
        {
            "listener.name.sasl_ssl.ssl.keystore.location": "/etc/kafka/broker.pem",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        },
        security_protocol="SASL_SSL",
    )
    props = _broker_properties(cluster)
    assert props["listeners"] == "SASL_SSL://127.0.0.1:20000"
    assert props["listener.name.sasl_ssl.plain.sasl.jaas.config"] == jaas
    assert "ssl.keystore.location" not in props
    assert cluster.ca_path is None
    assert not (tmp_path / "tls" / "ca.pem").exists()


def test_plaintext_cluster_has_no_tls_settings(tmp_path: Path) -> None:
    cluster = LocalCluster(1, 1, tmp_path, 20000)
    props = _broker_properties(cluster)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:20000"
    assert not any(k.startswith("ssl.") for k in props)
    assert cluster.client_config == {"bootstrap.servers": "127.0.0.1:20000"}


def test_unknown_protocol_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use one of PLAINTEXT, SSL"):
        LocalCluster(1, 1, tmp_path, 20000, security_protocol="TLS")
