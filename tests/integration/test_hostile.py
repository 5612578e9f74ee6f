"""Every attack of issue 25 against one 3-broker, 3-meta cluster, then proof that nothing went
down: every broker and meta node is still running, and each client (confluent-kafka,
kafka-python, aiokafka, kcat, KafkaJS, Java) still produces and consumes.

Each attack has its own focused test elsewhere (named in its docstring); this module checks
that, one after the other on the same cluster, none of them takes a node down or leaves it
unable to serve. The attacks come from those tests' reusable helpers.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from common.internal_security import InternalSecurity
from dataplane.log.batch import Compression
from meta.client import MetaClient
from tests.integration.clients.drivers import DRIVERS, ensure_setup, run_driver
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, request_bytes
from tests.integration.meta.raft_attacks import (
    announce_oversized_frame,
    closed_by_peer,
    code_running_frame,
    open_connections,
    rss_bytes,
    send_frame,
)
from tests.integration.test_internal_topics import assert_internal_topics_refuse_produce
from tests.integration.test_record_validation import (
    keyed_records,
    list_offsets_by_time,
    now_ms,
    produce_raw,
    raw_batch,
    zstd_bomb,
)

PLAIN, COMPACTED = "hostile-plain", "hostile-compacted"
MAX_CONNECTIONS_PER_IP = 200
FETCH_MAX_BYTES = 1 << 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("hostile"),
        max_connections_per_ip=str(MAX_CONNECTIONS_PER_IP),
        fetch_max_bytes=str(FETCH_MAX_BYTES),
    ) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        topics = [
            NewTopic(PLAIN, 1, 3),
            NewTopic(COMPACTED, 1, 3, config={"cleanup.policy": "compact"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(60)
        yield c


def brokers(cluster: LocalCluster) -> list[str]:
    return sorted(n for n, node in cluster.nodes.items() if node.kind == "broker")


def metas(cluster: LocalCluster) -> list[str]:
    return sorted(n for n, node in cluster.nodes.items() if node.kind == "meta")


def leader_port(cluster: LocalCluster, topic: str) -> int:
    """The Kafka port of the leader of `topic`'s partition 0."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    md = admin.list_topics(topic, timeout=30)
    leader = md.topics[topic].partitions[0].leader
    return md.brokers[leader].port


def test_internal_topics_refuse_clients(cluster: LocalCluster) -> None:
    """test_internal_topics.py: a bad record in __consumer_offsets once bricked every broker."""
    assert_internal_topics_refuse_produce(cluster)


def test_huge_create_topics(cluster: LocalCluster) -> None:
    """test_broker_limits.py: 100,000 partitions once opened files until the broker died."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("hostile-huge", 100_000, 1)])["hostile-huge"].result(60)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_record_attacks(cluster: LocalCluster) -> None:
    """test_record_validation.py: a zstd bomb (1 MB inflating to 32 GiB) to a compacted topic
    and under a timestamp lookup, a record count that lies, timestamps out of range."""
    compacted, plain = leader_port(cluster, COMPACTED), leader_port(cluster, PLAIN)
    bomb = raw_batch(zstd_bomb(), 1, now_ms(), Compression.ZSTD)
    assert produce_raw(compacted, COMPACTED, bomb).error_code == ErrorCode.invalid_record
    assert produce_raw(plain, PLAIN, bomb).error_code == ErrorCode.none  # not decoded
    looked_up = list_offsets_by_time(plain, PLAIN, now_ms() - 60_000)
    assert looked_up.error_code == ErrorCode.invalid_record
    lying = raw_batch(keyed_records(3), 4, now_ms())
    assert produce_raw(compacted, COMPACTED, lying).error_code == ErrorCode.invalid_record
    future = raw_batch(keyed_records(3), 3, now_ms() + 2 * 3_600_000)
    assert produce_raw(plain, PLAIN, future).error_code == ErrorCode.invalid_timestamp


def test_malformed_frames(cluster: LocalCluster) -> None:
    """test_bad_input.py: a frame announcing 2 GiB, an unknown API key, garbage; each broker
    closes that connection and answers the next one."""
    for name in brokers(cluster):
        port = cluster.nodes[name].port
        for frame in (
            struct.pack(">i", 2**31 - 1) + b"\x00" * 1024,
            request_bytes(999, 0, 1, b"", b"hostile"),
            b"\xff" * 64,
        ):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(frame)
                sock.settimeout(10)
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(1 << 16) == b""
        with WireClient(port) as w:
            assert w.call(18, 3, client_software_name="x", client_software_version="1").api_keys


def test_huge_fetch(cluster: LocalCluster) -> None:
    """test_broker_limits.py: a fetch asking for 2 GiB gets at most fetch.max.bytes."""
    port = leader_port(cluster, PLAIN)
    body = struct.pack(">iiiib", -1, 0, 1, 2**31 - 1, 0)
    body += struct.pack(">ih", 1, len(PLAIN)) + PLAIN.encode()
    body += struct.pack(">iiqi", 1, 0, 0, 2**31 - 1)
    head = struct.pack(">hhih", 1, 4, 1, 7) + b"hostile"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">i", len(head + body)) + head + body)
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
    assert 0 < size <= FETCH_MAX_BYTES + (64 << 10)


def test_connection_flood(cluster: LocalCluster) -> None:
    """test_broker_limits.py: more connections from one address than max.connections.per.ip;
    past the limit the broker closes them, and serves again once they are gone."""
    port = cluster.nodes[brokers(cluster)[0]].port
    held: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS_PER_IP + 100):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    finally:
        for sock in held:
            sock.close()
    ok = wait_for(lambda: _answers(port), what="the broker to serve after the flood")
    assert ok


def _answers(port: int) -> bool:
    try:
        with WireClient(port, timeout=5) as w:
            return bool(w.call(18, 0).api_keys)
    except OSError:
        return False


def test_raft_ports(cluster: LocalCluster, tmp_path: Path) -> None:
    """test_raft_port.py: a 2 GiB frame announced to each meta node's Raft port, a pickle that
    would run code, in clear, under a wrong password and under the real one, and a flood of
    silent connections (closed: past a few per peer at once, the rest once their time to
    prove the secret is out)."""
    password = InternalSecurity.from_properties(cluster.internal_properties).raft_password
    rafts = [f"127.0.0.1:{cluster.base_port + 200 + i}" for i in range(len(metas(cluster)))]
    floods = [sock for raft in rafts for sock in open_connections(raft, 200)]
    try:
        wait_for(lambda: all(map(closed_by_peer, floods)), 60, "the Raft port floods closed")
    finally:
        for sock in floods:
            sock.close()
    for raft, name in zip(rafts, metas(cluster), strict=True):
        proc = cluster.nodes[name].proc
        assert proc is not None
        before = rss_bytes(proc.pid)
        assert announce_oversized_frame(raft) < 32 << 20
        assert rss_bytes(proc.pid) - before < 32 << 20
        for j, pw in enumerate([None, "not-the-password", password]):
            marker = tmp_path / f"ran-{name}-{j}"
            assert send_frame(raft, code_running_frame(marker, pw))
            assert not marker.exists()


def test_after_every_attack_every_node_is_up_and_every_client_round_trips(
    cluster: LocalCluster,
) -> None:
    """Last (tests run in file order): every process runs, the meta quorum takes a write
    through each of its nodes, and each client produces and consumes with acks=all."""
    for name, node in cluster.nodes.items():
        assert node.proc is not None, f"{name} is down"
        assert node.proc.poll() is None, f"{name} is down"
    security = InternalSecurity.from_properties(cluster.internal_properties)
    for i, address in enumerate(cluster.meta_servers):

        async def write(address: str = address, i: int = i) -> int:
            async with MetaClient([address], security=security) as meta:
                return await meta.register_groups([(f"hostile-group-{i}", 0)])

        anyio.run(write)
    ensure_setup()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for driver in DRIVERS:
        topic = f"hostile-rt-{driver}"
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
        common = ("--bootstrap", cluster.bootstrap, "--topic", topic)
        produced = run_driver(driver, "produce", *common, "--count", "20", "--acks", "-1")
        assert produced.returncode == 0, (driver, produced.stderr[-2000:])
        consumed = run_driver(driver, "consume", *common, "--expect", "20")
        assert consumed.returncode == 0, (driver, consumed.stderr[-2000:])
