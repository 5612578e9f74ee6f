"""The producer and consumer perf tests, and the verifiable producer and consumer."""

from __future__ import annotations

import json
import re

import pytest

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import ok


def test_producer_and_consumer_perf(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic perf --partitions 3")
    perf = "kafka-producer-perf-test --topic perf --record-size 100 --throughput -1"
    sent = ok(b, f"{perf} --num-records 20000 --command-property acks=all")
    # 20000 records sent, 32102.7 records/sec (3.06 MB/sec), 82.52 ms avg latency, ...
    summary = re.fullmatch(
        r"(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.",
        sent.splitlines()[-1],
    )
    assert summary is not None, sent
    assert summary[1] == "20000", sent
    transactional = ok(
        b, f"{perf} --num-records 2000 --transactional-id perf-tx --transaction-duration-ms 100"
    )
    assert transactional.splitlines()[-1].startswith("2000 records sent, ")
    consumed = ok(
        b,
        "kafka-consumer-perf-test --topic perf --num-records 22000 --timeout 60000 "
        "--command-property group.protocol=consumer",
    )
    header, values = consumed.splitlines()[-2:]
    stats = dict(zip(header.split(", "), values.split(", "), strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == 22000
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(22000 * 100 / 2**20, abs=1e-3)


def test_verifiable_producer_and_consumer(cluster: LocalCluster) -> None:
    """Every record the verifiable producer saw acknowledged, the verifiable consumer reads,
    and its commits end each partition after the last one."""
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic verify --partitions 2")
    produced = ok(
        b, "kafka-verifiable-producer --topic verify --max-messages 500 --acks -1 --value-prefix 7"
    )
    events = [json.loads(line) for line in produced.splitlines()]
    assert events[0]["name"] == "startup_complete"
    acked = {
        (e["partition"], e["offset"]): e["value"]
        for e in events
        if e["name"] == "producer_send_success"
    }
    assert len(acked) == 500
    assert not [e for e in events if e["name"] == "producer_send_error"]
    assert events[-1]["name"] == "tool_data"
    assert events[-1]["sent"] == events[-1]["acked"] == 500

    consumed = ok(
        b,
        "kafka-verifiable-consumer --topic verify --group-id verifiers --group-protocol consumer "
        "--max-messages 500 --reset-policy earliest --verbose",
    )
    read = [json.loads(line) for line in consumed.splitlines()]
    records = {
        (r["partition"], r["offset"]): r["value"] for r in read if r["name"] == "record_data"
    }
    assert records == acked
    commits = [c for c in read if c["name"] == "offsets_committed"]
    assert commits
    assert all(c["success"] for c in commits)
    ends = {o["partition"]: o["offset"] for c in commits for o in c["offsets"]}
    assert ends == {p: max(o for q, o in acked if q == p) + 1 for p, _ in acked}
