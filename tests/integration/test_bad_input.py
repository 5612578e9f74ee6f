"""Bad input gets Kafka's answer — an error code or a closed connection — and the broker keeps
serving everyone else: garbage, truncated frames, absurd lengths, unknown API keys and
versions, undecodable bodies, and a request before ApiVersions."""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from cluster.local import LocalCluster
from dataplane.handlers import SUPPORTED_VERSIONS
from tests.integration.conftest import running_cluster
from tests.integration.kafka_wire import WireClient, encode

MAX_REQUEST = 1 << 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("bad"), brokers=1, metas=1, socket_request_max_bytes=MAX_REQUEST
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("ok", 1, 1)])["ok"].result(30)
        yield cluster


def _connect(cluster: LocalCluster) -> WireClient:
    return WireClient(cluster.nodes["broker-1"].port)


def _request(api_key: int, version: int, corr: int, body: bytes, flexible: bool) -> bytes:
    """A framed request with a header of our choosing (flexible or not, whatever the version)."""
    client_id = b"bad-input-test"
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    payload = header + (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(payload)) + payload


def _assert_still_serving(cluster: LocalCluster, tag: str) -> None:
    """A real client still produces and reads back on the same broker."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce("ok", value=tag.encode())
    assert producer.flush(15) == 0
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "x", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("ok", 0, -2)])
    seen = []
    for _ in range(40):
        for m in consumer.consume(100, 0.5):
            seen.append(m.value())
        if tag.encode() in seen:
            break
    consumer.close()
    assert tag.encode() in seen


def _broker_log(cluster: LocalCluster) -> str:
    return Path(cluster.nodes["broker-1"].log_file).read_text()


@pytest.mark.parametrize(
    ("name", "payload", "log_says"),
    [
        ("http request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "exceeds socket.request.max.bytes"),
        ("2 GiB length", b"\x7f\xff\xff\xff" + b"\x00" * 64, "exceeds socket.request.max.bytes"),
        ("negative length", b"\xff\xff\xff\xf0", "negative frame length"),
        ("short header", b"\x00\x00\x00\x03abc", "shorter than a request header"),
        ("unknown api key", _request(999, 0, 1, b"", False), "unknown API key 999"),
        ("unsupported version", _request(0, 99, 1, b"", False), "version 99 is not supported"),
        ("undecodable body", _request(3, 9, 1, b"\x05\x01", True), "cannot decode"),
        ("bad client id length", struct.pack(">ihhih", 10, 3, 1, 1, 500), "client id runs past"),
    ],
)
def test_bad_frames_close_the_connection(
    broker: LocalCluster, name: str, payload: bytes, log_says: str
) -> None:
    with _connect(broker) as w:
        w.sock.sendall(payload)
        assert w.closed_by_peer(), f"{name}: the broker kept the connection open"
    assert log_says in _broker_log(broker)
    _assert_still_serving(broker, name)


def test_oversized_request_is_refused(broker: LocalCluster) -> None:
    body = _request(0, 9, 1, b"\x00" * (MAX_REQUEST + 1), True)
    with _connect(broker) as w:
        # The broker may close while we are still sending: the expected outcome.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            w.sock.sendall(body)
        assert w.closed_by_peer()
    _assert_still_serving(broker, "oversized")


def test_truncated_frame_then_eof(broker: LocalCluster) -> None:
    with _connect(broker) as w:
        w.sock.sendall(struct.pack(">i", 100) + b"\x00\x03\x00\x09")
        w.sock.shutdown(socket.SHUT_WR)
        assert w.closed_by_peer()
    assert "stream ended inside a 100-byte frame" in _broker_log(broker)
    _assert_still_serving(broker, "truncated")


def test_half_sent_frame_does_not_block_others(broker: LocalCluster) -> None:
    with _connect(broker) as stalled:
        stalled.sock.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
        _assert_still_serving(broker, "stalled-neighbour")


def test_unsupported_api_versions_version_gets_v0_error_body(broker: LocalCluster) -> None:
    """KIP-511: the broker answers ApiVersions it cannot parse with a v0 body listing the
    versions of ApiVersions alone, as Kafka does."""
    with _connect(broker) as w:
        w.sock.sendall(_request(18, 99, 7, b"\x00\x00", True))
        frame = w.recv_frame()
    corr, body = struct.unpack(">i", frame[:4])[0], frame[4:]
    assert corr == 7
    resp, _ = entity_reader(ApiVersionsV0)(body, 0)
    assert resp.error_code == ErrorCode.unsupported_version
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys == {18: SUPPORTED_VERSIONS[18]}


def test_request_before_api_versions_is_served(broker: LocalCluster) -> None:
    """ApiVersions is optional: a Metadata request as the very first request gets its answer."""
    from kio.schema.metadata.v1.request import MetadataRequest
    from kio.schema.metadata.v1.response import MetadataResponse

    with _connect(broker) as w:
        w.sock.sendall(_request(3, 1, 42, encode(MetadataRequest(topics=None)), False))
        frame = w.recv_frame()
    assert struct.unpack(">i", frame[:4])[0] == 42
    resp, _ = entity_reader(MetadataResponse)(frame, 4)
    assert [b.node_id for b in resp.brokers] == [1]
    assert "ok" in {t.name for t in resp.topics}


def test_pipelined_requests_answer_in_order(broker: LocalCluster) -> None:
    """Several requests in flight on one connection get their responses in request order."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.metadata.v12.request import MetadataRequest

    api = encode(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    meta = encode(MetadataRequest(topics=None, include_topic_authorized_operations=False))
    requests = [(18, 3, api), (3, 12, meta), (18, 3, api), (3, 12, meta)]
    with _connect(broker) as w:
        w.sock.sendall(
            b"".join(_request(k, v, corr, body, True) for corr, (k, v, body) in enumerate(requests))
        )
        corrs = [struct.unpack(">i", w.recv_frame()[:4])[0] for _ in requests]
    assert corrs == [0, 1, 2, 3]
