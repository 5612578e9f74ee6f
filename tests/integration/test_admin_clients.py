"""Every admin call of issue 13 through the real clients' admin APIs — confluent-kafka's
AdminClient, kafka-python's KafkaAdminClient, the Java Admin client (4.3.0 and 3.9.1),
KafkaJS's admin, franz-go's kadm and IBM Sarama's ClusterAdmin — against a 3-broker Rafka
cluster, each checked by its effect: partitions in metadata after CreatePartitions, the log
start after DeleteRecords, config sources after DescribeConfigs/AlterConfigs, leaders after
ElectLeaders, replicas after a reassignment, ...

Each client runs through its driver's `admin` commands (tests/integration/clients/README.md,
"Admin"), which print one client-neutral JSON shape, so one test checks them all. A client is
only parametrized for the calls it has.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from cluster.polling import wait_for
from tests.integration.clients.drivers import ensure_setup, run_driver

JAVA = ["java-4.3.0", "java-3.9.1"]
GO = ["franz-go", "sarama"]
ALL = ["confluent", "kafka-python", *JAVA, "kafkajs", *GO]
BROKER_IDS = [1, 2, 3]

# Which drivers have which admin action (README.md, "Admin").
CAN: dict[str, list[str]] = {
    "describe-cluster": ALL,
    "describe-topics": ALL,
    "create-partitions": ALL,
    "delete-records": ALL,
    "describe-configs": ALL,
    "alter-configs": ALL,  # KafkaJS: the legacy AlterConfigs only
    # kafka-python's "legacy" alter_configs merges the current dynamic configs in: not Kafka's
    # AlterConfigs (Java 4 removed it).
    "alter-configs-legacy": ["confluent", "java-3.9.1", "kafkajs", *GO],
    "alter-configs-incremental": ["confluent", "kafka-python", *JAVA, *GO],
    "broker-logger": ["kafka-python", *JAVA, "kafkajs", "sarama"],
    "broker-default": [*JAVA, "franz-go"],  # the resource name "" (cluster-wide default)
    # read_only in DescribeConfigs' answer (kadm keeps it not)
    "read-only": [d for d in ALL if d != "franz-go"],
    "delete-topic": GO,
    "list-groups": GO,
    "elect-leaders": ["confluent", "kafka-python", *JAVA],
    "reassign": ["kafka-python", *JAVA, "kafkajs"],
    "describe-log-dirs": JAVA,
    "alter-log-dir": JAVA,
    "describe-features": ["kafka-python", *JAVA],
    "update-features": JAVA,
}


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


def admin(driver: str, cluster: LocalCluster, action: str, *args: str) -> list[dict]:
    """One `admin` action of `driver`; its JSON lines (the run must succeed)."""
    res = run_driver(driver, "admin", action, *args, "--bootstrap", cluster.bootstrap)
    assert res.returncode == 0, (
        f"{driver} admin {action} {args}: rc {res.returncode}\n{res.stderr[-3000:]}"
    )
    return res.lines


def one(driver: str, cluster: LocalCluster, action: str, *args: str) -> dict:
    lines = admin(driver, cluster, action, *args)
    assert len(lines) == 1, lines
    return lines[0]


def new_topic(
    cluster: LocalCluster, prefix: str, partitions: int, rf: int, configs: dict | None = None
) -> str:
    """A fresh topic, created in-process with confluent-kafka (CreateTopics is not under test)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    # {**config}: a fresh dict, typed as the stub wants (values str | int | float | bool)
    client = AdminClient({**cluster.client_config})
    client.create_topics([NewTopic(name, partitions, rf, config=configs or {})])[name].result(30)
    wait_for(lambda: _has_leaders(cluster, name, partitions), 30, f"{name}'s leaders")
    return name


def _has_leaders(cluster: LocalCluster, topic: str, partitions: int) -> bool:
    md = AdminClient({**cluster.client_config}).list_topics(topic, 10).topics[topic]
    return (
        md.error is None
        and len(md.partitions) == partitions
        and all(p.leader >= 0 for p in md.partitions.values())
    )


def produce(cluster: LocalCluster, topic: str, count: int) -> None:
    res = run_driver(
        "confluent",
        "produce",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--count",
        str(count),
    )
    assert res.returncode == 0, res.stderr


def describe_topic(driver: str, cluster: LocalCluster, topic: str, *extra: str) -> dict:
    return one(driver, cluster, "describe-topics", "--topic", topic, *extra)


def offsets(driver: str, cluster: LocalCluster, topic: str) -> dict[str, dict]:
    """{"p": {"earliest", "latest"}} from the driver's ListOffsets (kafka-python: confluent's)."""
    lister = "confluent" if driver == "kafka-python" else driver
    return one(lister, cluster, "list-offsets", "--topic", topic)["partitions"]


# --------------------------------------------------------------------------- cluster, topics


@pytest.mark.parametrize("driver", CAN["describe-cluster"])
def test_describe_cluster(cluster: LocalCluster, driver: str) -> None:
    """Three brokers with their listener addresses, the cluster id Metadata reports, and a live
    broker as the controller (KRaft brokers name one of themselves). KafkaJS asks Metadata."""
    out = one(driver, cluster, "describe-cluster")
    ports = [int(b.rsplit(":", 1)[1]) for b in cluster.bootstrap.split(",")]
    assert [(b["id"], b["host"], b["port"]) for b in out["brokers"]] == [
        (i, "127.0.0.1", port) for i, port in zip(BROKER_IDS, ports, strict=True)
    ]
    assert all(b["rack"] is None for b in out["brokers"])
    metadata_id = AdminClient({**cluster.client_config}).list_topics(timeout=10).cluster_id
    assert out["cluster_id"] == metadata_id
    assert out["cluster_id"]
    assert out["controller"] in BROKER_IDS


@pytest.mark.parametrize("driver", CAN["describe-topics"])
def test_describe_topics(cluster: LocalCluster, driver: str) -> None:
    """Java (both; Metadata if the broker lacks it) and kafka-python describe with
    DescribeTopicPartitions (75), two partitions per response so that they follow the cursor;
    the others use Metadata."""
    topic = new_topic(cluster, "dt", 5, 3)
    paging = ("--page-size", "2") if driver in [*JAVA, "kafka-python"] else ()
    out = describe_topic(driver, cluster, topic, *paging)
    assert out["error"] is None
    assert out["internal"] is False
    assert [p["partition"] for p in out["partitions"]] == [0, 1, 2, 3, 4]
    for p in out["partitions"]:
        assert sorted(p["replicas"]) == BROKER_IDS, p
        assert p["leader"] in p["isr"], p
        assert set(p["isr"]) <= set(p["replicas"]), p
    if out["topic_id"] is not None:  # KafkaJS 2.2.4's Metadata has no topic ids
        assert out["topic_id"] == describe_topic("confluent", cluster, topic)["topic_id"]
    if driver != "kafkajs":  # KafkaJS's Metadata request may create a topic it asks about
        missing = describe_topic(driver, cluster, f"no-such-{uuid.uuid4().hex[:6]}")
        assert missing["error"] == "UNKNOWN_TOPIC_OR_PARTITION", missing


@pytest.mark.parametrize("driver", CAN["create-partitions"])
def test_create_partitions(cluster: LocalCluster, driver: str) -> None:
    topic = new_topic(cluster, "cp", 2, 2)

    def create(*args: str) -> str | None:
        return one(driver, cluster, "create-partitions", "--topic", topic, *args)["error"]

    def partitions() -> list[dict]:
        return describe_topic(driver, cluster, topic)["partitions"]

    assert create("--count", "6", "--validate-only", "true") is None
    assert create("--count", "4") is None
    parts = wait_for(
        lambda: p if len(p := partitions()) == 4 else None, 30, "4 partitions in metadata"
    )
    for p in parts:
        assert len(p["replicas"]) == 2, p
        assert p["leader"] in p["replicas"], p
    # Explicit assignment of the fifth partition.
    assert create("--count", "5", "--assignments", "3,1") is None
    parts = wait_for(
        lambda: p if len(p := partitions()) == 5 else None, 30, "5 partitions in metadata"
    )
    assert parts[4]["replicas"] == [3, 1], parts[4]
    assert create("--count", "3") == "INVALID_PARTITIONS"  # fewer than it has
    assert create("--count", "5") == "INVALID_PARTITIONS"  # as many as it has
    assert create("--count", "7", "--assignments", "1,99;2,3") == "INVALID_REPLICA_ASSIGNMENT"
    assert len(partitions()) == 5
    other = one(
        driver,
        cluster,
        "create-partitions",
        "--topic",
        f"nope-{uuid.uuid4().hex[:6]}",
        "--count",
        "3",
    )
    assert other["error"] == "UNKNOWN_TOPIC_OR_PARTITION", other


@pytest.mark.parametrize("driver", CAN["delete-records"])
def test_delete_records(cluster: LocalCluster, driver: str) -> None:
    """The low watermark moves (ListOffsets earliest follows); deleting below it changes
    nothing; -1 deletes up to the high watermark; past the high watermark is
    OFFSET_OUT_OF_RANGE."""
    topic = new_topic(cluster, "dr", 1, 3)
    produce(cluster, topic, 30)

    def delete(offset: int) -> dict:
        return one(driver, cluster, "delete-records", "--topic", topic, "--offsets", f"0:{offset}")

    assert delete(10) == {"topic": topic, "partition": 0, "error": None, "low_watermark": 10}
    assert offsets(driver, cluster, topic) == {"0": {"earliest": 10, "latest": 30}}
    assert delete(5)["low_watermark"] == 10
    assert delete(31)["error"] == "OFFSET_OUT_OF_RANGE"
    assert delete(-1)["low_watermark"] == 30
    assert offsets(driver, cluster, topic) == {"0": {"earliest": 30, "latest": 30}}


# --------------------------------------------------------------------------- configs


def configs(driver: str, cluster: LocalCluster, kind: str, name: str) -> dict[str, dict]:
    out = one(driver, cluster, "describe-configs", f"--{kind}", name)
    assert out["error"] is None, out
    return out["configs"]


@pytest.mark.parametrize("driver", CAN["describe-configs"])
def test_describe_configs_topic(cluster: LocalCluster, driver: str) -> None:
    topic = new_topic(cluster, "dc", 1, 3, {"retention.ms": "3600000"})
    got = configs(driver, cluster, "topic", topic)
    retention = got["retention.ms"]
    assert (retention["value"], retention["source"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert not retention["read_only"]
    assert not retention["sensitive"]
    # Synonyms, most specific first: the topic's own, then the broker's (a default here); as
    # in Kafka, retention.ms has none at the broker while log.retention.ms is not set
    assert retention["synonyms"] == [["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"]]
    assert got["segment.bytes"]["synonyms"] == [
        ["log.segment.bytes", "1073741824", "DEFAULT_CONFIG"]
    ]
    for key, default in [
        ("min.insync.replicas", "1"),
        ("segment.bytes", "1073741824"),
        ("cleanup.policy", "delete"),
    ]:
        assert (got[key]["value"], got[key]["source"]) == (default, "DEFAULT_CONFIG"), key
    if driver in JAVA or driver == "kafka-python":  # v3+: types (and documentation if asked)
        assert retention["type"] == "LONG", retention
    if driver in JAVA:  # kafka-python does not ask for documentation
        assert retention["documentation"], retention
    if driver != "kafka-python":  # kafka-python drops a resource's error code
        missing = one(driver, cluster, "describe-configs", "--topic", f"no-{uuid.uuid4().hex[:6]}")
        assert missing["error"] == "UNKNOWN_TOPIC_OR_PARTITION", missing


@pytest.mark.parametrize("driver", CAN["describe-configs"])
def test_describe_configs_broker(cluster: LocalCluster, driver: str) -> None:
    """A broker's settings: the static ones from its properties file, Kafka's defaults, and
    sensitive ones without their value."""
    got = configs(driver, cluster, "broker", "1")
    drf = got["default.replication.factor"]
    assert (drf["value"], drf["source"]) == ("3", "STATIC_BROKER_CONFIG")
    assert (got["log.retention.hours"]["value"], got["log.retention.hours"]["source"]) == (
        "168",
        "DEFAULT_CONFIG",
    )
    assert got["node.id"]["value"] == "1"
    if driver in CAN["read-only"]:
        assert got["node.id"]["read_only"]
        assert got["message.max.bytes"]["read_only"] is False
    for key, entry in got.items():
        if entry["sensitive"]:
            assert entry["value"] is None, key


@pytest.mark.parametrize("driver", CAN["broker-logger"])
def test_describe_configs_broker_logger(cluster: LocalCluster, driver: str) -> None:
    got = configs(driver, cluster, "broker-logger", "1")
    assert got, "no loggers"
    for name, entry in got.items():
        assert entry["value"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"), name


def _alter(driver: str, cluster: LocalCluster, kind: str, name: str, *args: str) -> str | None:
    out = one(driver, cluster, "alter-configs", f"--{kind}", name, *args)
    assert (out["resource"], out["name"]) == (kind, name), out
    return out["error"]


def _value(driver: str, cluster: LocalCluster, kind: str, name: str, key: str) -> tuple:
    entry = configs(driver, cluster, kind, name)[key]
    return entry["value"], entry["source"]


MODES = [
    pytest.param(d, mode, id=f"{d}-{mode}")
    for mode in ("incremental", "legacy")
    for d in CAN[f"alter-configs-{mode}"]
]


@pytest.mark.parametrize(("driver", "mode"), MODES)
def test_alter_configs_topic(cluster: LocalCluster, driver: str, mode: str) -> None:
    """Incremental SET/DELETE/APPEND/SUBTRACT, or legacy AlterConfigs whose entries replace
    the topic's whole dynamic config; validate_only changes nothing; bad values and unknown
    names are INVALID_CONFIG."""
    topic = new_topic(cluster, "ac", 1, 3)
    legacy = ("--legacy", "true") if mode == "legacy" else ()

    def alter(*args: str) -> str | None:
        return _alter(driver, cluster, "topic", topic, *legacy, *args)

    def value(key: str) -> tuple:
        return _value(driver, cluster, "topic", topic, key)

    assert alter("--set", "retention.ms=7200000", "--set", "segment.ms=3600000") is None
    assert value("retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert value("segment.ms") == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    if mode == "legacy":  # what is not given goes back to its default
        assert alter("--set", "retention.ms=7200000") is None
    else:
        assert alter("--delete", "segment.ms") is None
    assert value("segment.ms") == ("604800000", "DEFAULT_CONFIG")
    assert value("retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert alter("--set", "retention.ms=1234", "--validate-only", "true") is None
    assert value("retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert alter("--set", "retention.ms=soon") == "INVALID_CONFIG"
    assert alter("--set", "no.such.config=1") == "INVALID_CONFIG"
    assert value("retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    if mode == "incremental":
        assert alter("--append", "cleanup.policy=compact") is None
        assert value("cleanup.policy") == ("delete,compact", "DYNAMIC_TOPIC_CONFIG")
        assert alter("--subtract", "cleanup.policy=delete") is None
        assert value("cleanup.policy") == ("compact", "DYNAMIC_TOPIC_CONFIG")
    missing = one(
        driver,
        cluster,
        "alter-configs",
        "--topic",
        f"no-{uuid.uuid4().hex[:6]}",
        *legacy,
        "--set",
        "retention.ms=1000",
    )
    assert missing["error"] == "UNKNOWN_TOPIC_OR_PARTITION", missing


@pytest.mark.parametrize(("driver", "mode"), MODES)
def test_alter_configs_broker(cluster: LocalCluster, driver: str, mode: str) -> None:
    """A per-broker dynamic setting shows as DYNAMIC_BROKER_CONFIG on that broker only; the
    cluster-wide default (resource name "") as DYNAMIC_DEFAULT_BROKER_CONFIG on the others
    (only the Java client takes the name "")."""
    default = driver in CAN["broker-default"]
    legacy = ("--legacy", "true") if mode == "legacy" else ()
    key = "log.cleaner.backoff.ms"
    try:
        assert _alter(driver, cluster, "broker", "2", *legacy, "--set", f"{key}=16000") is None
        wait_for(
            lambda: (
                _value(driver, cluster, "broker", "2", key) == ("16000", "DYNAMIC_BROKER_CONFIG")
            ),
            10,
            f"{key} on broker 2",
        )
        assert _value(driver, cluster, "broker", "1", key) == ("15000", "DEFAULT_CONFIG")
        if default:
            assert _alter(driver, cluster, "broker", "", *legacy, "--set", f"{key}=17000") is None
            wait_for(
                lambda: (
                    _value(driver, cluster, "broker", "1", key)
                    == ("17000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
                ),
                10,
                f"{key} default",
            )
            assert _value(driver, cluster, "broker", "2", key) == ("16000", "DYNAMIC_BROKER_CONFIG")
        # A read-only setting cannot change at run time.
        assert _alter(driver, cluster, "broker", "1", *legacy, "--set", "node.id=7") in (
            "INVALID_CONFIG",
            "INVALID_REQUEST",
        )
    finally:
        if mode == "legacy":
            _alter(driver, cluster, "broker", "2", *legacy)
            if default:
                _alter(driver, cluster, "broker", "", *legacy)
        else:
            _alter(driver, cluster, "broker", "2", "--delete", key)
            if default:
                _alter(driver, cluster, "broker", "", "--delete", key)
    wait_for(
        lambda: _value(driver, cluster, "broker", "2", key) == ("15000", "DEFAULT_CONFIG"),
        10,
        f"{key} back to its default",
    )


# --------------------------------------------------------------------------- topics, groups


@pytest.mark.parametrize("driver", CAN["delete-topic"])
def test_delete_topic(cluster: LocalCluster, driver: str) -> None:
    """DeleteTopics: the topic leaves the metadata; deleting it again is
    UNKNOWN_TOPIC_OR_PARTITION."""
    topic = new_topic(cluster, "del", 2, 3)
    assert one(driver, cluster, "delete-topic", "--topic", topic) == {"topic": topic, "error": None}
    wait_for(
        lambda: describe_topic(driver, cluster, topic)["error"] == "UNKNOWN_TOPIC_OR_PARTITION",
        30,
        f"{topic} gone from the metadata",
    )
    again = one(driver, cluster, "delete-topic", "--topic", topic)
    assert again == {"topic": topic, "error": "UNKNOWN_TOPIC_OR_PARTITION"}, again


@pytest.mark.parametrize("driver", CAN["list-groups"])
def test_list_groups(cluster: LocalCluster, driver: str) -> None:
    """ListGroups finds a group that only has committed offsets (no member: Empty, classic,
    no protocol type). Sarama's ListConsumerGroups gives names and protocol types only."""
    topic = new_topic(cluster, "lg", 1, 3)
    group = f"lg-{uuid.uuid4().hex[:8]}"
    args = ("--bootstrap", cluster.bootstrap, "--topic", topic, "--group", group)
    res = run_driver(driver, "commit", *args, "--offsets", "0:0")
    assert res.returncode == 0, res
    assert res.lines == [{"error": None, "partitions": {"0": None}}], res
    listed = {g["group"]: g for g in one(driver, cluster, "list-groups")["groups"]}
    want: dict[str, str | None] = {
        "group": group,
        "state": "Empty",
        "type": "classic",
        "protocol_type": "",
    }
    if driver == "sarama":
        want |= {"state": None, "type": None}
    assert listed.get(group) == want, listed.get(group)


# --------------------------------------------------------------------------- replicas, leaders


def _elect(driver: str, cluster: LocalCluster, *args: str) -> dict:
    return one(driver, cluster, "elect-leaders", *args)


def _reassign(driver: str, cluster: LocalCluster, topic: str, part: int, *args: str) -> str | None:
    return one(driver, cluster, "reassign", "--topic", topic, "--partition", str(part), *args)[
        "error"
    ]


def _reassigned(driver: str, cluster: LocalCluster, topic: str, part: int, replicas: list[int]):
    """Waits until no reassignment of the partition is listed and its replicas are `replicas`
    (in that order) with every one in the ISR."""
    lister = driver if driver in CAN["reassign"] else "java-4.3.0"

    def done() -> dict | None:
        listed = one(
            lister, cluster, "list-reassignments", "--topic", topic, "--partitions", str(part)
        )
        if listed["reassignments"]:
            return None
        p = describe_topic(lister, cluster, topic)["partitions"][part]
        return p if p["replicas"] == replicas and sorted(p["isr"]) == sorted(replicas) else None

    return wait_for(done, 60, f"{topic}-{part} on {replicas}", interval=0.5)


@pytest.mark.parametrize("driver", CAN["elect-leaders"])
def test_elect_leaders_not_needed(cluster: LocalCluster, driver: str) -> None:
    topic = new_topic(cluster, "el", 3, 3)
    for election in ("preferred", "unclean"):
        out = _elect(
            driver, cluster, "--election", election, "--topic", topic, "--partitions", "0,1,2"
        )
        assert out == {
            "error": None,
            "partitions": [
                {"topic": topic, "partition": p, "error": "ELECTION_NOT_NEEDED"} for p in range(3)
            ],
        }, election
    # Every partition (null): only those whose leader changed (or could not) are answered for.
    # kafka-python lists every partition of the metadata instead of sending null.
    out = _elect(driver, cluster)
    mine = [p["error"] for p in out["partitions"] if p["topic"] == topic]
    assert out["error"] is None
    assert mine == (["ELECTION_NOT_NEEDED"] * 3 if driver == "kafka-python" else []), out
    out = _elect(driver, cluster, "--topic", f"no-{uuid.uuid4().hex[:6]}", "--partitions", "0")
    assert [p["error"] for p in out["partitions"]] == ["UNKNOWN_TOPIC_OR_PARTITION"], out


@pytest.mark.parametrize("driver", CAN["elect-leaders"])
def test_elect_preferred_leader(cluster: LocalCluster, driver: str) -> None:
    """Reordering the replicas (a reassignment to the same set) makes another broker the
    preferred leader without moving the leader; a preferred election then moves it."""
    topic = new_topic(cluster, "ep", 1, 3)
    first = describe_topic("java-4.3.0", cluster, topic)["partitions"][0]
    leader, *others = first["replicas"]
    assert first["leader"] == leader
    target = [others[0], leader, others[1]]
    mover = driver if driver in CAN["reassign"] else "java-4.3.0"
    assert _reassign(mover, cluster, topic, 0, "--replicas", ",".join(map(str, target))) is None
    assert _reassigned(driver, cluster, topic, 0, target)["leader"] == leader
    out = _elect(driver, cluster, "--topic", topic, "--partitions", "0")
    assert out == {"error": None, "partitions": [{"topic": topic, "partition": 0, "error": None}]}
    wait_for(
        lambda: describe_topic("confluent", cluster, topic)["partitions"][0]["leader"] == target[0],
        30,
        "the preferred replica as leader",
    )


@pytest.mark.parametrize("driver", CAN["reassign"])
def test_reassign(cluster: LocalCluster, driver: str) -> None:
    """A partition moves from two brokers to another pair with its records; bad targets are
    INVALID_REPLICA_ASSIGNMENT; cancelling nothing is NO_REASSIGNMENT_IN_PROGRESS."""
    topic = new_topic(cluster, "ra", 1, 2)
    produce(cluster, topic, 20)
    old = describe_topic(driver, cluster, topic)["partitions"][0]["replicas"]
    target = [old[1], next(b for b in BROKER_IDS if b not in old)]
    assert _reassign(driver, cluster, topic, 0, "--replicas", ",".join(map(str, target))) is None
    _reassigned(driver, cluster, topic, 0, target)
    res = run_driver(
        "confluent", "consume", "--bootstrap", cluster.bootstrap, "--topic", topic, "--expect", "20"
    )
    assert res.returncode == 0, res.stderr
    assert len(res.lines) == 20, res.stderr
    for bad in ("1,99", "1,1"):
        err = _reassign(driver, cluster, topic, 0, "--replicas", bad)
        assert err == "INVALID_REPLICA_ASSIGNMENT", (bad, err)
    if driver != "kafkajs":  # KafkaJS cannot cancel
        assert _reassign(driver, cluster, topic, 0, "--cancel", "true") == (
            "NO_REASSIGNMENT_IN_PROGRESS"
        )
    err = _reassign(driver, cluster, f"no-{uuid.uuid4().hex[:6]}", 0, "--replicas", "1,2")
    assert err == "UNKNOWN_TOPIC_OR_PARTITION"


# --------------------------------------------------------------------------- log dirs, features


@pytest.mark.parametrize("driver", CAN["describe-log-dirs"])
def test_describe_log_dirs(cluster: LocalCluster, driver: str) -> None:
    topic = new_topic(cluster, "ld", 1, 3)
    produce(cluster, topic, 10)

    def replicas() -> dict | None:
        out = one(driver, cluster, "describe-log-dirs")
        assert out["error"] is None, out
        assert sorted(out["brokers"]) == ["1", "2", "3"], out
        found = {}
        for broker, dirs in out["brokers"].items():
            for d in dirs:
                assert d["error"] is None, d
                assert d["path"].startswith("/"), d
                if d["total_bytes"] is not None:
                    assert 0 <= d["usable_bytes"] <= d["total_bytes"], d
                for r in d["replicas"]:
                    if r["topic"] == topic:
                        found[broker] = (d["path"], r)
        done = len(found) == 3 and all(
            r["size"] > 0 and r["offset_lag"] == 0 for _, r in found.values()
        )
        return found if done else None

    found = wait_for(replicas, 30, "the topic's replicas on every broker with data")
    for broker, (path, r) in found.items():
        assert r["future"] is False, (
            broker,
            path,
        )
        assert path.rstrip("/").endswith(f"broker-{broker}"), (
            broker,
            path,
        )


@pytest.mark.parametrize("driver", CAN["alter-log-dir"])
def test_alter_replica_log_dir(cluster: LocalCluster, driver: str) -> None:
    """With one log dir per broker: asking for the dir a replica is in is a no-op; a path that
    is not one of the broker's log dirs is LOG_DIR_NOT_FOUND (moves: test_log_dirs.py)."""
    topic = new_topic(cluster, "ad", 1, 3)
    dirs = one(driver, cluster, "describe-log-dirs", "--brokers", "1")["brokers"]["1"]
    path = next(d["path"] for d in dirs if any(r["topic"] == topic for r in d["replicas"]))

    def move(to: str) -> str | None:
        return one(
            driver,
            cluster,
            "alter-log-dir",
            "--topic",
            topic,
            "--partition",
            "0",
            "--broker",
            "1",
            "--dir",
            to,
        )["error"]

    assert move(path) is None
    assert move("/nonexistent/rafka-dir") == "LOG_DIR_NOT_FOUND"


@pytest.mark.parametrize("driver", CAN["describe-features"])
def test_describe_features(cluster: LocalCluster, driver: str) -> None:
    """Finalized features (ApiVersions) within the brokers' supported ranges."""
    out = one(driver, cluster, "describe-features")
    assert "transaction.version" in out["supported"], out
    for name, level in out["finalized"].items():
        assert name in out["supported"], name
        assert out["supported"][name]["min"] <= level["max"] <= out["supported"][name]["max"]


@pytest.mark.parametrize("driver", CAN["update-features"])
def test_update_features(cluster: LocalCluster, driver: str) -> None:
    """Refusals leave the finalized levels as they were: an unknown feature, a level beyond
    what the brokers support, a downgrade not asked for as one; validate_only changes nothing;
    setting the current level again is accepted."""
    before = one(driver, cluster, "describe-features")
    level = before["finalized"].get("transaction.version", {"max": 0})["max"]
    top = before["supported"]["transaction.version"]["max"]

    def update(*args: str) -> str | None:
        return one(driver, cluster, "update-features", *args)["features"][args[1].split("=")[0]]

    assert update("--feature", "no.such.feature=1") == "INVALID_UPDATE_VERSION"
    assert update("--feature", f"transaction.version={top + 1}") == "INVALID_UPDATE_VERSION"
    if level > 0:
        assert update("--feature", f"transaction.version={level - 1}") == "INVALID_UPDATE_VERSION"
        assert update(
            "--feature",
            f"transaction.version={level - 1}",
            "--upgrade-type",
            "safe-downgrade",
            "--validate-only",
            "true",
        ) in (None, "INVALID_UPDATE_VERSION")
    assert update("--feature", f"transaction.version={level}") is None
    after = one(driver, cluster, "describe-features")
    assert after["finalized"] == before["finalized"]
