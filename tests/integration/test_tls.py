"""TLS listeners with real clients: SSL produce/consume against the development CA, mTLS with
ssl.client.auth=required, each listener's own address in Metadata, certificates replaced
without a restart, plaintext bytes on a TLS port, and `rafka up --security-protocol SSL`."""

from __future__ import annotations

import contextlib
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, BrokerMetadata
from cryptography import x509

from cluster.kafka_client import request_bytes
from cluster.local import LocalCluster, free_base_port
from common import dev_ca
from tests.integration.conftest import wait_for

MTLS_OFFSET, PLAIN_OFFSET = 50, 60  # extra listeners beside the SSL one at the base port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker with three listeners: SSL (`rafka up --security-protocol SSL`'s, at the base
    port), MTLS (SSL requiring client certificates, advertised as localhost) and PLAINTEXT."""
    tmp = tmp_path_factory.mktemp("tls")
    base = free_base_port(1, 1)
    mtls, plain = base + MTLS_OFFSET, base + PLAIN_OFFSET
    overrides = {
        "listeners": f"SSL://127.0.0.1:{base},MTLS://127.0.0.1:{mtls},"
        f"PLAINTEXT://127.0.0.1:{plain}",
        "advertised.listeners": f"SSL://127.0.0.1:{base},MTLS://localhost:{mtls},"
        f"PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL,PLAINTEXT:PLAINTEXT",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.location": str(tmp / "tls" / dev_ca.CA_FILE),
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*).*$/$1/,DEFAULT",
    }
    c = LocalCluster(1, 1, tmp, base, overrides, security_protocol="SSL")
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _brokers(config: Mapping[str, str], timeout: float) -> dict[int, BrokerMetadata]:
    """The brokers a Metadata request through `config`'s bootstrap server names."""
    return AdminClient({**config}).list_topics(timeout=timeout).brokers


def _broker_log(cluster: LocalCluster) -> str:
    return cluster.nodes["broker-1"].log_file.read_text()


def test_produce_and_consume_over_ssl(cluster: LocalCluster) -> None:
    assert cluster.ca_path == cluster.data_dir / "tls" / "ca.pem"
    config = cluster.client_config
    assert config["security.protocol"] == "SSL"
    producer = Producer(config | {"linger.ms": 5})
    for i in range(200):
        producer.produce("tls-topic", f"v{i}".encode(), f"k{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(config | {"group.id": "tls-group", "auto.offset.reset": "earliest"})
    consumer.subscribe(["tls-topic"])
    got: list[bytes] = []

    def poll() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value() or b"")
        return len(got) == 200

    try:
        wait_for(poll, 60, "200 records consumed over SSL")
        consumer.commit(asynchronous=False)  # the group coordinator's SSL address works too
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(200))


def test_metadata_gives_each_listener_its_own_address(cluster: LocalCluster) -> None:
    base = cluster.base_port
    ssl_config = cluster.client_config
    cases = [
        (ssl_config, ("127.0.0.1", base)),
        (ssl_config | {"bootstrap.servers": f"127.0.0.1:{base + MTLS_OFFSET}"} | _alice(cluster),
         ("localhost", base + MTLS_OFFSET)),
        ({"bootstrap.servers": f"127.0.0.1:{base + PLAIN_OFFSET}"},
         ("127.0.0.1", base + PLAIN_OFFSET)),
    ]  # fmt: skip
    for config, address in cases:
        brokers = _brokers(config, timeout=20)
        assert [(b.host, b.port) for b in brokers.values()] == [address], config


def _alice(cluster: LocalCluster) -> dict[str, str]:
    """A client certificate (key and chain in one PEM file) signed by the development CA."""
    assert cluster.ca_path is not None
    pem = dev_ca.issue_certificate(cluster.ca_path.parent, "alice.pem", "alice", server=False)
    return {"ssl.certificate.location": str(pem), "ssl.key.location": str(pem)}


def _api_versions_over_tls(port: int, context: ssl.SSLContext) -> bytes:
    """Send ApiVersions v0 over TLS; the response frame, or b"" when the broker closed."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(request_bytes(18, 0, 1, b""))
        try:
            return tls.recv(65536)
        except (ssl.SSLError, ConnectionResetError):
            return b""


def test_mtls_refuses_a_client_without_certificate(cluster: LocalCluster) -> None:
    assert cluster.ca_path is not None
    port = cluster.base_port + MTLS_OFFSET
    anonymous = ssl.create_default_context(cafile=str(cluster.ca_path))
    assert _api_versions_over_tls(port, anonymous) == b""
    wait_for(
        lambda: "PEER_DID_NOT_RETURN_A_CERTIFICATE" in _broker_log(cluster),
        10,
        "the broker's log line about the missing client certificate",
    )
    with_certificate = ssl.create_default_context(cafile=str(cluster.ca_path))
    with_certificate.load_cert_chain(_alice(cluster)["ssl.certificate.location"])
    assert len(_api_versions_over_tls(port, with_certificate)) > 4

    # a real client with the certificate produces through the mTLS listener
    config = cluster.client_config | _alice(cluster)
    config["bootstrap.servers"] = f"127.0.0.1:{port}"
    producer = Producer(config)
    producer.produce("mtls-topic", b"from alice")
    assert producer.flush(30) == 0
    # and without one it gets nowhere
    refused = cluster.client_config | {"bootstrap.servers": f"127.0.0.1:{port}"}
    with pytest.raises(KafkaException):
        _brokers(refused, timeout=3)


def test_plaintext_client_on_a_tls_port_is_closed_and_the_broker_serves_on(
    cluster: LocalCluster,
) -> None:
    with socket.create_connection(("127.0.0.1", cluster.base_port), timeout=10) as s:
        s.sendall(request_bytes(18, 0, 1, b""))
        with contextlib.suppress(ConnectionResetError):  # or closed, or a TLS alert record
            assert s.recv(65536)[:1] in (b"", b"\x15")
    wait_for(
        lambda: "WRONG_VERSION_NUMBER" in _broker_log(cluster),
        10,
        "the broker's log line about the failed TLS handshake",
    )
    assert _brokers(cluster.client_config, timeout=20)


def _served_common_name(port: int, ca: Path) -> str:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    subject = x509.load_der_x509_certificate(der).subject
    return str(subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


def test_certificate_replaced_without_restart(cluster: LocalCluster) -> None:
    assert cluster.ca_path is not None
    port = cluster.base_port
    pid = cluster.nodes["broker-1"].proc.pid  # type: ignore[union-attr]
    assert _served_common_name(port, cluster.ca_path) == "broker-1"
    dev_ca.issue_certificate(
        cluster.ca_path.parent, "broker-1.pem", "broker-1-renewed", server=True
    )
    wait_for(
        lambda: _served_common_name(port, cluster.ca_path) == "broker-1-renewed",  # type: ignore[arg-type]
        30,
        "new connections to get the renewed certificate",
    )
    assert "reloaded its certificates" in _broker_log(cluster)
    assert cluster.nodes["broker-1"].proc.pid == pid  # type: ignore[union-attr]
    producer = Producer(cluster.client_config)
    producer.produce("tls-topic", b"after the renewal")
    assert producer.flush(30) == 0


def test_rafka_up_with_ssl_prints_the_ca_and_serves_tls(tmp_path: Path) -> None:
    base = free_base_port(1, 1)
    command = [sys.executable, "-m", "cluster.cli", "up", "--brokers", "1", "--meta", "1"]
    command += ["--data-dir", str(tmp_path), "--base-port", str(base)]
    proc = subprocess.Popen(
        [*command, "--security-protocol", "SSL"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("ssl.ca.location" in x for x in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        ca = tmp_path.resolve() / "tls" / "ca.pem"
        assert str(ca) in "".join(lines), lines
        config = {
            "bootstrap.servers": f"127.0.0.1:{base}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca),
        }
        assert list(_brokers(config, timeout=20)) == [1]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
