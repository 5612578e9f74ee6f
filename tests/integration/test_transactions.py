"""Transactions through every client with a transactional producer: confluent-kafka
(librdkafka), kafka-python, KafkaJS, the Java client (4.3.0, transaction version 2 when the
broker finalizes it, and 3.9.1, version 1), franz-go and IBM Sarama, each through its driver's
txn-produce, txn-copy and txn-fence commands (tests/integration/clients/README.md,
"Transactions").

Per client: committed and aborted transactions, read_committed sees the committed records
only and read_uncommitted all of them; an open transaction is hidden from read_committed until
it commits; offsets sent in a transaction reach the group only when it commits (never when it
aborts) and a consume-transform-produce loop copies each input record exactly once; a second
producer with the same transactional.id fences the first.

One 3-broker cluster for the module; topics have 3 partitions, replication factor 3.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.clients.drivers import (
    Result,
    Running,
    ensure_setup,
    latin1,
    record,
    run_driver,
)
from tests.integration.conftest import wait_for

TXN_DRIVERS = [
    "confluent",
    "kafka-python",
    "kafkajs",
    "java-4.3.0",
    "java-3.9.1",
    "franz-go",
    "sarama",
]
PARTITIONS = 3
FENCED = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}
# A read that must come back empty (or short) watches the topic this long.
QUIET_S = "4"


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


def _run(driver: str, cluster: LocalCluster, *args: str) -> Result:
    return run_driver(driver, *args, "--bootstrap", cluster.bootstrap, timeout=180)


def _ok(res: Result, what: str) -> list:
    assert res.returncode == 0, f"{what}: exit {res.returncode}: {res.stderr[-4000:]}"
    return res.lines


def _topic(cluster: LocalCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    args = ("create-topic", "--topic", name, "--partitions", str(PARTITIONS))
    _ok(_run("confluent", cluster, *args, "--replication-factor", "3"), f"create {name}")
    return name


def _read(driver: str, cluster: LocalCluster, topic: str, n: int, isolation: str) -> list[dict]:
    """Exactly n records of topic (from the log start) as the driver's consumer reads them."""
    res = _run(
        driver,
        cluster,
        "consume",
        "--topic",
        topic,
        "--expect",
        str(n),
        "--isolation-level",
        isolation,
        "--timeout",
        "60",
    )
    lines = _ok(res, f"{driver} consume {isolation} {topic}")
    assert len(lines) == n, f"{isolation}: {len(lines)} records, expected {n}: {res.stderr[-2000:]}"
    return lines


def _read_quiet(
    driver: str,
    cluster: LocalCluster,
    topic: str,
    upto: int,
    isolation: str,
    quiet_s: str = QUIET_S,
) -> list:
    """What the driver's consumer reads of topic within `quiet_s` seconds, asking for `upto`
    records: for reads that must come back short (a timed-out consume may exit 1)."""
    res = _run(
        driver,
        cluster,
        "consume",
        "--topic",
        topic,
        "--expect",
        str(upto),
        "--isolation-level",
        isolation,
        "--timeout",
        quiet_s,
    )
    records = [r for r in res.lines if "offset" in r]
    assert res.returncode in (0, 1), res.stderr[-3000:]
    assert len(records) == len(res.lines), res.stderr[-3000:]
    return records


def _keys(lines: list[dict]) -> list[str]:
    return sorted((latin1(r["key"]) or b"").decode() for r in lines)


def _key_names(ids: Iterator[int] | range | list[int]) -> list[str]:
    return sorted(f"key-{i}" for i in ids)


def _check_reference(lines: list[dict], start_ts: int) -> None:
    """Each record read is the reference record of its key (value, headers, timestamp)."""
    for r in lines:
        i = int(latin1(r["key"]).decode().split("-")[1])  # type: ignore[union-attr]
        want = record(i, start_ts)
        assert latin1(r["value"]) == want.value, r
        assert [(k, latin1(v)) for k, v in r["headers"]] == want.headers, r
        assert r["timestamp"] == want.timestamp, r


def _committed(driver: str, cluster: LocalCluster, topic: str, group: str) -> dict[str, int]:
    """The group's committed offsets of topic; kafka-python has no `committed` command, so
    confluent (librdkafka's admin API) looks for it."""
    observer = "confluent" if driver == "kafka-python" else driver
    res = _run(observer, cluster, "committed", "--topic", topic, "--group", group)
    return _ok(res, f"{observer} committed {group}")[0]


def _produce_input(cluster: LocalCluster, topic: str, n: int) -> dict[str, tuple[int, int]]:
    """n plain (non-transactional) reference records; key -> (partition, offset)."""
    res = _run("confluent", cluster, "produce", "--topic", topic, "--count", str(n))
    return {r["key"]: (r["partition"], r["offset"]) for r in _ok(res, f"produce {topic}")}


def _end_offsets(produced: dict[str, tuple[int, int]]) -> dict[str, int]:
    ends = {str(p): 0 for p in range(PARTITIONS)}
    for p, o in produced.values():
        ends[str(p)] = max(ends[str(p)], o + 1)
    return ends


def _check_copies(lines: list[dict], produced: dict[str, tuple[int, int]]) -> None:
    """Every input record exactly once in txn-copy's output, with its value and source."""
    keys = Counter(_keys(lines))
    assert keys == Counter(list(produced)), f"duplicates/missing: {keys - Counter(list(produced))}"
    for r in lines:
        key = latin1(r["key"]).decode()  # type: ignore[union-attr]
        p, o = produced[key]
        assert r["headers"] == [["src", f"{p}:{o}"]], r
        assert latin1(r["value"]) == record(int(key.split("-")[1]), 0).value, r


@pytest.mark.parametrize("driver", TXN_DRIVERS)
def test_commit_and_abort(cluster: LocalCluster, driver: str) -> None:
    """Six transactions of ten records, committed and aborted in turn: read_committed sees the
    30 committed records only, read_uncommitted all 60."""
    topic = _topic(cluster, f"txn-{driver}")
    start_ts = int(time.time() * 1000)
    res = _run(
        driver,
        cluster,
        "txn-produce",
        "--topic",
        topic,
        "--transactional-id",
        f"tp-{uuid.uuid4().hex[:8]}",
        "--count",
        "60",
        "--batches",
        "6",
        "--end",
        "commit,abort",
        "--start-ts",
        str(start_ts),
    )
    events = _ok(res, f"{driver} txn-produce")
    assert [(e["event"], e["first"], e["count"]) for e in events] == [
        ("commit" if k % 2 == 0 else "abort", 10 * k, 10) for k in range(6)
    ]
    committed_ids = [i for k in (0, 2, 4) for i in range(10 * k, 10 * k + 10)]
    read_committed = _read(driver, cluster, topic, 30, "read_committed")
    assert _keys(read_committed) == _key_names(committed_ids)
    _check_reference(read_committed, start_ts)
    read_uncommitted = _read(driver, cluster, topic, 60, "read_uncommitted")
    assert _keys(read_uncommitted) == _key_names(range(60))
    _check_reference(read_uncommitted, start_ts)


@pytest.mark.parametrize("driver", ["java-4.3.0", "java-3.9.1"])
def test_unflushed_transactions_every_fourth_aborted(cluster: LocalCluster, driver: str) -> None:
    """20 transactions of 100 records sent without waiting for their acknowledgements, every
    4th aborted. An abort usually comes before any of its records is sent (they are dropped),
    right after the previous commit: with transaction version 2 (4.3.0) an EndTxn at the epoch
    that commit answered, while its markers are still being written. The coordinator used to
    check the epoch against PrepareCommit's rule first (only a retry, one epoch lower, passes)
    and answered PRODUCER_FENCED; it must wait for the commit to complete, then abort. 3.9.1
    (version 1) sends no EndTxn for such an abort. read_committed sees the 1,500 committed
    records, exactly."""
    topic = _topic(cluster, f"unflushed-{driver}")
    start_ts = int(time.time() * 1000)
    res = _run(
        driver,
        cluster,
        "txn-produce",
        "--topic",
        topic,
        "--transactional-id",
        f"uf-{uuid.uuid4().hex[:8]}",
        "--count",
        "2000",
        "--batches",
        "20",
        "--end",
        "commit,commit,commit,abort",
        "--flush",
        "false",
        "--start-ts",
        str(start_ts),
    )
    events = _ok(res, f"{driver} txn-produce --flush false")
    assert [(e["event"], e["first"], e["count"]) for e in events] == [
        ("abort" if k % 4 == 3 else "commit", 100 * k, 100) for k in range(20)
    ]
    committed_ids = [i for k in range(20) if k % 4 != 3 for i in range(100 * k, 100 * k + 100)]
    lines = _read(driver, cluster, topic, 1500, "read_committed")
    assert _keys(lines) == _key_names(committed_ids)
    _check_reference(lines, start_ts)
    # nothing more: the aborted records (those that reached the log) stay hidden
    more = _read_quiet(driver, cluster, topic, 1501, "read_committed", quiet_s="10")
    assert _keys(more) == _key_names(committed_ids)


@pytest.mark.parametrize("driver", TXN_DRIVERS)
def test_open_transaction_hidden_until_commit(cluster: LocalCluster, driver: str) -> None:
    """While a transaction is open its records are in the log (read_uncommitted reads them)
    but read_committed stops below them; once it commits, read_committed reads them all."""
    topic = _topic(cluster, f"open-{driver}")
    start_ts = int(time.time() * 1000)
    producer = Running(
        driver,
        "txn-produce",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--transactional-id",
        f"open-{uuid.uuid4().hex[:8]}",
        "--count",
        "12",
        "--hold",
        "true",
        "--start-ts",
        str(start_ts),
    )
    try:
        producer.wait_line(lambda e: e.get("event") == "hold", 90, "transaction open")
        assert _keys(_read(driver, cluster, topic, 12, "read_uncommitted")) == _key_names(range(12))
        assert _read_quiet(driver, cluster, topic, 12, "read_committed") == []
        producer.tell("end")
        producer.wait_line(lambda e: e.get("event") == "commit", 90, "commit")
    finally:
        done = producer.finish()
    assert done.returncode == 0, done.stderr[-3000:]
    lines = _read(driver, cluster, topic, 12, "read_committed")
    assert _keys(lines) == _key_names(range(12))
    _check_reference(lines, start_ts)


@pytest.mark.parametrize("driver", TXN_DRIVERS)
def test_offsets_visible_only_after_commit(cluster: LocalCluster, driver: str) -> None:
    """txn-copy: offsets sent in an aborted transaction never reach the group, those of an
    open one are not visible yet, those of a committed one are; the output holds each input
    record once for read_committed, plus the aborted copies for read_uncommitted."""
    src, out = _topic(cluster, f"in-{driver}"), _topic(cluster, f"out-{driver}")
    produced = _produce_input(cluster, src, 30)
    group, txn_id = f"g-{uuid.uuid4().hex[:8]}", f"copy-{uuid.uuid4().hex[:8]}"
    copy = ("--topic", src, "--output", out, "--group", group, "--transactional-id", txn_id)
    nothing = {str(p): -1 for p in range(PARTITIONS)}

    first = _ok(
        _run(
            driver,
            cluster,
            "txn-copy",
            *copy,
            "--batch",
            "10",
            "--end",
            "abort",
            "--max-batches",
            "1",
        ),
        f"{driver} txn-copy abort",
    )
    aborted = [e for e in first if e["event"] == "abort"]
    assert len(aborted) == 1, first
    assert 0 < aborted[0]["records"] <= 10, first
    assert first[-1]["event"] == "closed", first
    assert first[-1]["committed"] == 0, first
    assert _committed(driver, cluster, src, group) == nothing

    copier = Running(
        driver,
        "txn-copy",
        "--bootstrap",
        cluster.bootstrap,
        *copy,
        "--batch",
        "30",
        "--count",
        "30",
        "--hold",
        "true",
    )
    try:
        copier.wait_line(lambda e: e.get("event") == "hold", 90, "first transaction open")
        assert _committed(driver, cluster, src, group) == nothing
    finally:
        done = copier.finish()  # stdin's end: every transaction commits
    assert done.returncode == 0, done.stderr[-3000:]
    closed = done.lines[-1]
    assert closed["event"] == "closed", done.lines
    assert closed["committed"] == 30, done.lines
    ends = _end_offsets(produced)
    wait_for(
        lambda: _committed(driver, cluster, src, group) == ends,
        60,
        f"committed offsets {ends}",
        interval=0.5,
    )
    _check_copies(_read(driver, cluster, out, 30, "read_committed"), produced)
    n_aborted = aborted[0]["records"]
    everything = _read(driver, cluster, out, 30 + n_aborted, "read_uncommitted")
    assert sorted(Counter(_keys(everything)).values()).count(2) == n_aborted


@pytest.mark.parametrize("driver", TXN_DRIVERS)
def test_consume_transform_produce_exactly_once(cluster: LocalCluster, driver: str) -> None:
    """txn-copy of 50 records in transactions of at most 7, every third one aborted and its
    records read again: read_committed output = each input record exactly once."""
    src, out = _topic(cluster, f"cin-{driver}"), _topic(cluster, f"cout-{driver}")
    produced = _produce_input(cluster, src, 50)
    group = f"g-{uuid.uuid4().hex[:8]}"
    lines = _ok(
        _run(
            driver,
            cluster,
            "txn-copy",
            "--topic",
            src,
            "--output",
            out,
            "--group",
            group,
            "--transactional-id",
            f"ctp-{uuid.uuid4().hex[:8]}",
            "--batch",
            "7",
            "--count",
            "50",
            "--end",
            "commit,commit,abort",
        ),
        f"{driver} txn-copy",
    )
    closed = lines[-1]
    assert closed["event"] == "closed", lines
    assert closed["committed"] == 50, lines
    aborted = sum(e["records"] for e in lines if e["event"] == "abort")
    assert closed["aborted"] == aborted > 0, lines
    committed_keys = [k for e in lines if e["event"] == "commit" for k in e["keys"]]
    assert Counter(committed_keys) == Counter(list(produced)), "txn-copy's own account"
    _check_copies(_read(driver, cluster, out, 50, "read_committed"), produced)
    _read(driver, cluster, out, 50 + aborted, "read_uncommitted")
    assert _committed(driver, cluster, src, group) == _end_offsets(produced)


@pytest.mark.parametrize("driver", TXN_DRIVERS)
def test_zombie_producer_fenced(cluster: LocalCluster, driver: str) -> None:
    """Producer B initializes with A's transactional.id while A's transaction is open: A's
    next send or commit fails as fenced, A's record is aborted, B's committed."""
    topic = _topic(cluster, f"fence-{driver}")
    res = _run(
        driver, cluster, "txn-fence", "--topic", topic, "--transactional-id", f"z-{uuid.uuid4()}"
    )
    lines = _ok(res, f"{driver} txn-fence")
    assert [e["event"] for e in lines] == ["begin", "sent", "init", "commit", "fenced"], lines
    assert lines[-1]["error"] in FENCED, lines[-1]
    assert _keys(_read(driver, cluster, topic, 2, "read_uncommitted")) == ["key-0", "key-1"]
    assert _keys(_read_quiet(driver, cluster, topic, 3, "read_uncommitted")) == ["key-0", "key-1"]
    assert _keys(_read_quiet(driver, cluster, topic, 2, "read_committed")) == ["key-1"]


@pytest.mark.parametrize(
    ("driver", "tv2"), [("java-4.3.0", True), ("java-3.9.1", False)], ids=["4.3.0", "3.9.1"]
)
def test_java_transaction_version(cluster: LocalCluster, driver: str, tv2: bool) -> None:
    """The broker finalizes transaction.version 2: the 4.3.0 client then runs KIP-890 part 2
    (no AddPartitionsToTxn, Produce v12 adds the partitions, EndTxn v5), 3.9.1 version 1."""
    topic = _topic(cluster, f"tv-{driver}")
    res = run_driver(
        driver,
        "txn-produce",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--transactional-id",
        f"tv-{uuid.uuid4().hex[:8]}",
        "--count",
        "10",
        "--batches",
        "2",
        env={"RAFKA_CLIENT_LOG": "DEBUG"},
        timeout=180,
    )
    _ok(res, f"{driver} txn-produce")
    sent = set(
        re.findall(
            r"Sending \w+ request with header RequestHeader\(apiKey=(\w+), apiVersion=(\d+)",
            res.stderr,
        )
    )
    versions = {key: max(int(v) for k, v in sent if k == key) for key, _ in sent}
    if tv2:
        assert "ADD_PARTITIONS_TO_TXN" not in versions, versions
        assert versions["PRODUCE"] >= 12, versions
        assert versions["END_TXN"] >= 5, versions
    else:
        assert versions["ADD_PARTITIONS_TO_TXN"] <= 4, versions
        assert versions["PRODUCE"] <= 11, versions
        assert versions["END_TXN"] <= 4, versions


def test_delete_records_removes_an_open_transactions_records(cluster: LocalCluster) -> None:
    """librdkafka's 0103 (do_test_fatal_idempo_error_without_kip360): a transactional producer
    commits, DeleteRecords removes that transaction's records and the producer goes on. The
    commit returns before its markers are written, so the deletion may find the transaction
    still open in the partition; Kafka moves the log start past its records all the same
    (maybeIncrementLogStartOffset), and a read_committed consumer sees only what came after.
    Rafka kept them (the log start stopped at the open transaction), so the consumer got the
    deleted records too. Here the transaction is still open, deterministically."""
    topic = f"txn-delete-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": topic, "linger.ms": 0}
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, b"first-%d" % i, partition=0)
    assert producer.flush(30) == 0
    (deleted,) = admin.delete_records([TopicPartition(topic, 0, 6)]).values()
    assert deleted.result(60).low_watermark == 6
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, b"second-%d" % i, partition=0)
    producer.commit_transaction(60)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": topic,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []

    def at_end() -> bool:
        message = consumer.poll(1)
        if message is None:
            return False
        error = message.error()
        if error is None:
            values.append(present(message.value()))
            return False
        assert error.code() == KafkaError._PARTITION_EOF, error
        return True

    try:
        wait_for(at_end, timeout=60, what=f"the end of {topic}")
    finally:
        consumer.close()
    assert values == [b"second-%d" % i for i in range(4)]
