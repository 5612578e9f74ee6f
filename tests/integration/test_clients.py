"""Every client round-trips through a 3-broker cluster: create a multi-partition topic, produce
keyed records with headers and explicit timestamps (each compression codec), read everything
back from the earliest offset with assign/seek, and ask ListOffsets by time.

Clients: confluent-kafka, kafka-python, aiokafka, kcat, KafkaJS 2.2.4, the Java client (4.3.0
and 3.9.1), franz-go and IBM Sarama, each through its driver in tests/integration/clients (one
command-line contract for all of them)."""

from __future__ import annotations

import time
import uuid

import pytest

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.clients.checks import (
    check_consumed,
    check_produced,
    expected_offsets_for_times,
)
from tests.integration.clients.drivers import (
    DRIVERS,
    EXIT_UNSUPPORTED,
    ensure_setup,
    latin1,
    run_driver,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 6
COUNT = 200


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


def _run(driver: str, cluster: LocalCluster, *args: str):
    return run_driver(driver, *args, "--bootstrap", cluster.bootstrap)


def _create_topic(driver: str, cluster: LocalCluster, topic: str) -> None:
    args = (
        "create-topic",
        "--topic",
        topic,
        "--partitions",
        str(PARTITIONS),
        "--replication-factor",
        "1",
    )
    res = _run(driver, cluster, *args)
    if res.returncode == EXIT_UNSUPPORTED:  # kcat has no admin API
        res = _run("confluent", cluster, *args)
    assert res.returncode == 0, res.stderr


def _produce(driver: str, cluster: LocalCluster, topic: str, codec: str) -> tuple[dict, int]:
    start_ts = int(time.time() * 1000)
    res = _run(
        driver,
        cluster,
        "produce",
        "--topic",
        topic,
        "--count",
        str(COUNT),
        "--compression",
        codec,
        "--start-ts",
        str(start_ts),
    )
    errors = check_produced(res, driver, COUNT, start_ts)
    assert not errors, errors
    return {r["key"]: (r["partition"], r["offset"]) for r in res.lines}, start_ts


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("driver", list(DRIVERS))
def test_round_trip(cluster: LocalCluster, driver: str, codec: str) -> None:
    topic = f"rt-{driver}-{codec}-{uuid.uuid4().hex[:6]}"
    _create_topic(driver, cluster, topic)
    produced, start_ts = _produce(driver, cluster, topic, codec)
    res = _run(
        driver, cluster, "consume", "--topic", topic, "--expect", str(COUNT), "--timeout", "30"
    )
    errors = check_consumed(res, driver, produced, COUNT, start_ts)
    assert not errors, errors
    if codec != "none":
        return
    middle = sorted(r["timestamp"] for r in res.lines)[COUNT // 2]
    for ts in (middle, middle + 10**7):  # the second is after every record: -1 everywhere
        got = _run(driver, cluster, "offsets-for-times", "--topic", topic, "--timestamp", str(ts))
        assert got.returncode == 0, got.stderr
        assert got.lines[0] == expected_offsets_for_times(res.lines, PARTITIONS, ts)


@pytest.fixture(scope="module")
def java_zstd_topic(cluster: LocalCluster) -> tuple[str, dict, int]:
    topic = f"cross-{uuid.uuid4().hex[:6]}"
    _create_topic("java-4.3.0", cluster, topic)
    produced, start_ts = _produce("java-4.3.0", cluster, topic, "zstd")
    return topic, produced, start_ts


@pytest.mark.parametrize("driver", list(DRIVERS))
def test_reads_what_another_client_wrote(
    cluster: LocalCluster, java_zstd_topic: tuple, driver: str
) -> None:
    topic, produced, start_ts = java_zstd_topic
    res = _run(
        driver, cluster, "consume", "--topic", topic, "--expect", str(COUNT), "--timeout", "30"
    )
    errors = check_consumed(res, "java-4.3.0", produced, COUNT, start_ts)
    assert not errors, errors


# The Go drivers take --idempotence (franz-go: on by default with acks=all, kgo needs acks=all
# for it; Sarama: off by default).
ACKS_CASES = [
    (driver, acks, idempotence)
    for driver in ("franz-go", "sarama")
    for acks, idempotence in (("0", "false"), ("1", "false"), ("-1", "false"), ("-1", "true"))
]


@pytest.mark.parametrize(("driver", "acks", "idempotence"), ACKS_CASES)
def test_acks_and_idempotence(
    cluster: LocalCluster, driver: str, acks: str, idempotence: str
) -> None:
    """Each acks setting, idempotent or not: every record acknowledged (acks 0: without an
    offset) is read back once, as sent."""
    topic = f"acks-{driver}-{acks}-{idempotence}-{uuid.uuid4().hex[:6]}"
    _create_topic(driver, cluster, topic)
    start_ts = int(time.time() * 1000)
    res = _run(
        driver,
        cluster,
        "produce",
        "--topic",
        topic,
        "--count",
        str(COUNT),
        "--acks",
        acks,
        "--idempotence",
        idempotence,
        "--compression",
        "lz4",
        "--start-ts",
        str(start_ts),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    if acks == "0":
        assert sorted(r["key"] for r in res.lines) == sorted(f"key-{i}" for i in range(COUNT))
        assert {r["offset"] for r in res.lines} == {-1}
    else:
        assert not check_produced(res, driver, COUNT, start_ts)
    got = _run(driver, cluster, "consume", "--topic", topic, "--expect", str(COUNT))
    produced = {f"key-{i}": (0, 0) for i in range(COUNT)}
    if acks != "0":
        produced = {r["key"]: (r["partition"], r["offset"]) for r in res.lines}
    else:  # positions unknown to the producer: each record where it was read
        for r in got.lines:
            produced[present(latin1(r["key"])).decode()] = (r["partition"], r["offset"])
    errors = check_consumed(got, driver, produced, COUNT, start_ts)
    assert not errors, errors
