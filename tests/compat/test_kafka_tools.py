"""Apache Kafka 4.4's own command-line tools run against Rafka as an operator runs them
(`kafka-topics.sh`, `kafka-configs.sh`, ... from the jars: tests/peers/kafka_tools.py), each
output checked line by line: against what the same command prints for Apache Kafka (the compat
session's single broker; ids, ports and times masked) where both can be given the same state,
else against the lines Kafka's tool prints for that state.

One 3-broker Rafka serves the module; the ACL and delegation-token commands run against a
SASL_SSL cluster with an authorizer (tests/integration/secured_cluster.py) of their own.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Producer

from cluster.kafka_client import KafkaConnection
from cluster.local import LocalCluster
from tests.compat.pair import record
from tests.compat.streams_requests import HEARTBEAT, heartbeat
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.secured_cluster import SecuredCluster, secured_cluster
from tests.peers.apache_kafka import ApacheKafka
from tests.peers.kafka_tools import java_command, run_tool

API_VERSIONS, DESCRIBE_QUORUM = 18, 55
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("kafka-tools"), brokers=3, metas=1) as c:
        yield c


@dataclass
class Sides:
    """Where the same commands run: Apache Kafka and Rafka."""

    kafka: str
    rafka: str


@pytest.fixture(scope="module")
def sides(apache_kafka: ApacheKafka, cluster: LocalCluster) -> Sides:
    return Sides(apache_kafka.bootstrap, cluster.bootstrap)


def tool(
    bootstrap: str, command: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`command` as an operator types it (the script's name, then its options; split as a
    shell does), against `bootstrap`; `args` are further options (file paths)."""
    name, *options = shlex.split(command)
    return run_tool(name, "--bootstrap-server", bootstrap, *options, *args, input=input)


def ok(bootstrap: str, command: str, *args: str, input: str | None = None) -> str:
    """The tool's stdout; it must exit 0."""
    return printed(bootstrap, command, *args, input=input)[0]


def printed(bootstrap: str, command: str, *args: str, input: str | None = None) -> tuple[str, str]:
    """What the tool prints for its user: stdout, and stderr without the clients' log lines
    and stack traces (the messages tools print there themselves); it must exit 0."""
    r = tool(bootstrap, command, *args, input=input)
    assert r.returncode == 0, f"{command} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout, _messages(r.stderr)


def fails(bootstrap: str, command: str, *args: str) -> str:
    """What the tool prints (stdout, then stderr without log lines and stack traces); it must
    exit non-zero."""
    r = tool(bootstrap, command, *args)
    assert r.returncode != 0, f"{command} succeeded:\n{r.stdout}"
    return _messages(r.stdout + r.stderr)


def _messages(text: str) -> str:
    return "\n".join(
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith(("\tat ", "\t...", "[20", " (", "Caused by: "))
    )


def rows(text: str) -> list[list[str]]:
    """The output's non-empty lines as whitespace-separated cells (column widths vary)."""
    return [line.split() for line in text.splitlines() if line.strip()]


_MASKS = [
    (re.compile(r"127\.0\.0\.1:\d+\s*\(\d+\)"), "COORDINATOR"),  # host:port (id)
    (re.compile(r"127\.0\.0\.1:\d+"), "HOST:PORT"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "UUID"),
    (re.compile(r"(?<![\w-])[A-Za-z0-9_-]{22}(?![\w-])"), "UUID"),  # member and topic ids
    (re.compile(r"\b1\d{12}\b"), "TIME"),  # epoch milliseconds
]


def masked(text: str) -> list[list[str]]:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return rows(text)


def each(sides: Sides, do: Callable[[str], T]) -> tuple[T, T]:
    """`do(bootstrap)` for Apache Kafka and for Rafka, at once: (Kafka's, Rafka's)."""
    with ThreadPoolExecutor(1) as pool:
        kafka = pool.submit(do, sides.kafka)
        rafka = do(sides.rafka)
        return kafka.result(), rafka


def both(
    sides: Sides,
    case: str,
    command: str,
    *args: str,
    input: str | None = None,
    rows_of: str | None = None,
) -> str:
    """Run on both: what each prints (stdout, then the tool's messages on stderr) must be the
    same once masked (a row of the compat report). Returns Rafka's stdout. `rows_of`: compare
    only the header and the rows of that name (Kafka is shared with the other compat modules,
    so its listings hold their groups too)."""
    kafka, rafka = each(sides, lambda b: printed(b, command, *args, input=input))
    if rows_of is not None:
        kafka, rafka = _rows_of(rows_of, kafka), _rows_of(rows_of, rafka)
    _compare(case, command, "\n".join(kafka), "\n".join(rafka))
    return rafka[0]


def _rows_of(name: str, printed: tuple[str, str]) -> tuple[str, str]:
    """The header line (if any) and the lines of `name` of a listing (stdout, stderr)."""
    kept = [line for line in printed[0].splitlines() if line.split()[:1] in (["GROUP"], [name])]
    return "\n".join(kept), printed[1]


def both_fail(sides: Sides, case: str, command: str) -> str:
    """Run on both: each must fail, and say the same once masked."""
    kafka, rafka = each(sides, lambda b: fails(b, command))
    _compare(case, command, kafka, rafka)
    return rafka


def _compare(case: str, command: str, kafka: str, rafka: str) -> None:
    same = masked(kafka) == masked(rafka)
    found = [] if same else [f"`{command}`", "Kafka:", kafka, "Rafka:", rafka]
    summary = kafka.strip().splitlines()[0][:60] if kafka.strip() else "(nothing)"
    record(f"tool: {case}", summary, "same" if same else rafka.strip()[:60], found)


def both_configs(sides: Sides, case: str, command: str, names: str | None = None) -> list[str]:
    """kafka-configs --describe on both: the lines of the comma-separated config `names`
    (None: those Rafka lists) must be the same. Returns Rafka's."""
    kafka, rafka = each(sides, lambda b: ok(b, command))
    wanted = (
        set(names.split(","))
        if names
        else {line.split("=")[0].strip() for line in rafka.splitlines()[1:]}
    )

    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.split("=")[0].strip() in wanted]

    _compare(case, command, "\n".join(lines(kafka)), "\n".join(lines(rafka)))
    return lines(rafka)


def produce(bootstrap: str, topic: str, lines: list[str], *reader_properties: str) -> None:
    """kafka-console-producer with `lines` on its stdin."""
    options = "".join(f" --reader-property {p}" for p in reader_properties)
    ok(bootstrap, f"kafka-console-producer --topic {topic}{options}", input="\n".join(lines) + "\n")


def describe_topic(bootstrap: str, topic: str) -> list[list[str]]:
    """kafka-topics --describe: the topic line, then per partition `Topic: t Partition: p
    Leader: l Replicas: r,... Isr: i,... Elr: LastKnownElr:` as cells."""
    return rows(ok(bootstrap, f"kafka-topics --describe --topic {topic}"))


# -- kafka-topics -------------------------------------------------------------------------------


def test_topics_create_describe_alter_delete(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    created = ok(
        b,
        "kafka-topics --create --topic ops --partitions 3 --replication-factor 3 "
        "--config cleanup.policy=compact --config max.message.bytes=20000",
    )
    assert created == "Created topic ops.\n"
    assert "ops" in ok(b, "kafka-topics --list").split()
    described = describe_topic(b, "ops")
    assert described[0][:3] == ["Topic:", "ops", "TopicId:"]
    assert described[0][4:] == [
        "PartitionCount:",
        "3",
        "ReplicationFactor:",
        "3",
        "Configs:",
        "cleanup.policy=compact,max.message.bytes=20000",
    ]
    assert [r[3] for r in described[1:]] == ["0", "1", "2"]
    for r in described[1:]:
        assert r[4:10:2] == ["Leader:", "Replicas:", "Isr:"]
        assert r[10:] == ["Elr:", "LastKnownElr:"]
        assert r[5] == r[7].split(",")[0]  # the preferred replica leads
        assert sorted(r[7].split(",")) == sorted(r[9].split(",")) == ["1", "2", "3"]
    assert {r[5] for r in described[1:]} == {"1", "2", "3"}  # leaders spread over brokers

    error = "Error while executing topic command : "
    assert fails(b, "kafka-topics --create --topic ops").splitlines()[0] == (
        f"{error}Topic 'ops' already exists."
    )
    assert fails(b, "kafka-topics --create --topic wide --replication-factor 5").splitlines()[
        0
    ] == (
        f"{error}Unable to replicate the partition 5 time(s): The target replication factor "
        "of 5 cannot be reached because only 3 broker(s) are registered or some brokers have "
        "all their log directories cordoned."
    )
    assert fails(b, "kafka-topics --describe --topic nope").splitlines()[0] == (
        f"{error}Topic 'nope' does not exist as expected"
    )
    assert ok(b, "kafka-topics --alter --topic ops --partitions 5") == ""
    assert describe_topic(b, "ops")[0][5] == "5"
    assert fails(b, "kafka-topics --alter --topic ops --partitions 2").splitlines()[0] == (
        f"{error}The topic ops currently has 5 partition(s); 2 would not be an increase."
    )

    # All healthy: nothing under-replicated, unavailable or under min ISR; at min ISR only the
    # partitions of a topic whose min.insync.replicas is its replication factor.
    ok(
        b,
        "kafka-topics --create --topic strict --partitions 2 --replication-factor 3 "
        "--config min.insync.replicas=3",
    )
    for flag in ("under-replicated", "unavailable", "under-min-isr"):
        assert ok(b, f"kafka-topics --describe --{flag}-partitions") == "", flag
    at_min = rows(ok(b, "kafka-topics --describe --at-min-isr-partitions"))
    assert [(r[1], r[3]) for r in at_min] == [("strict", "0"), ("strict", "1")]
    overrides = rows(ok(b, "kafka-topics --describe --topics-with-overrides"))
    assert {r[1]: r[-1] for r in overrides} == {
        "ops": "cleanup.policy=compact,max.message.bytes=20000",
        "strict": "min.insync.replicas=3",
    }
    assert ok(b, "kafka-topics --delete --topic strict") == ""
    wait_for(lambda: "strict" not in ok(b, "kafka-topics --list").split(), what="the deletion")


def test_topics_while_a_broker_is_down(cluster: LocalCluster) -> None:
    """Broker 3 stopped: its replicas leave the ISR (under-replicated), a partition only it
    has goes offline (unavailable, and no unclean election can help), and both heal when it
    is back."""
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic down --replica-assignment 3:1")
    ok(b, "kafka-topics --create --topic alone --replica-assignment 3")
    cluster.stop_node("broker-3")
    try:
        up = ",".join(a for a in b.split(",") if a != f"127.0.0.1:{cluster.nodes['broker-3'].port}")

        def listed(flag: str) -> list[list[str]]:
            out = rows(ok(up, f"kafka-topics --describe --{flag}-partitions"))
            return [r[3:10] for r in out if r[1] in ("down", "alone")]

        wait_for(lambda: listed("under-replicated"), what="the ISR to shrink")
        assert listed("under-replicated") == [
            ["0", "Leader:", "1", "Replicas:", "3,1", "Isr:", "1"]
        ]
        assert listed("unavailable") == [["0", "Leader:", "none", "Replicas:", "3", "Isr:", "3"]]
        out = fails(up, "kafka-leader-election --election-type unclean --topic alone --partition 0")
        assert out.splitlines()[0].startswith(
            "Error completing leader election (UNCLEAN) for partition: alone-0: "
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException"
        ), out
    finally:
        cluster.start_node("broker-3")
        cluster.wait_ready(names=["broker-3"])
    wait_for(
        lambda: ok(b, "kafka-topics --describe --under-replicated-partitions") == "",
        timeout=60,
        what="the ISR to be full again",
    )
    assert ok(b, "kafka-topics --describe --unavailable-partitions") == ""


# -- kafka-configs ------------------------------------------------------------------------------


def test_configs_of_topics(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic cfg --partitions 1")
    topic = "kafka-configs --entity-type topics --entity-name cfg"
    assert ok(
        b,
        f"{topic} --alter --add-config "
        "max.message.bytes=20000,retention.bytes=1000000,cleanup.policy=compact",
    ) == ("Completed updating config for topic cfg.\n")
    assert ok(b, f"{topic} --alter --delete-config retention.bytes") == (
        "Completed updating config for topic cfg.\n"
    )
    assert ok(b, f"{topic} --describe") == (
        "Dynamic configs for topic cfg are:\n"
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  max.message.bytes=20000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=20000, DEFAULT_CONFIG:message.max.bytes=1048588}\n"
    )
    described = ok(b, f"{topic} --describe --all").splitlines()
    assert described[0] == "All configs for topic cfg are:"
    values = dict(line.split()[0].split("=", 1) for line in described[1:])
    assert values["cleanup.policy"] == "compact"
    assert values["max.message.bytes"] == "20000"
    assert values["retention.bytes"] == "-1"
    assert values["min.insync.replicas"] == "1"
    assert values["segment.bytes"] == "1073741824"
    bad = fails(b, f"{topic} --alter --add-config retention.ms=soon")
    assert "Invalid value soon for configuration retention.ms" in bad, bad


def test_configs_of_brokers(sides: Sides, cluster: LocalCluster) -> None:
    default = "kafka-configs --entity-type brokers --entity-default"
    one = "kafka-configs --entity-type brokers --entity-name 1"
    changed = "log.retention.ms,leader.replication.throttled.rate"
    set_default = f"{default} --alter --add-config log.retention.ms=3600000"
    assert both(sides, "configs: alter the broker default", set_default) == (
        "Completed updating default config for brokers in the cluster.\n"
    )
    set_one = (
        f"{one} --alter --add-config log.retention.ms=7200000,leader.replication.throttled.rate=5"
    )
    assert both(sides, "configs: alter broker 1", set_one) == (
        "Completed updating config for broker 1.\n"
    )
    try:
        # (other lines may differ: Kafka's cluster default has min.insync.replicas, which it
        # sets for eligible leader replicas)
        assert both_configs(sides, "configs: describe broker 1", f"{one} --describe", changed) == [
            "  leader.replication.throttled.rate=5 sensitive=false "
            "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=5}",
            "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.retention.ms=7200000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "
            "DEFAULT_CONFIG:log.retention.hours=168}",
        ]
        both_configs(
            sides, "configs: describe the broker default", f"{default} --describe", changed
        )
    finally:
        each(sides, lambda b: ok(b, f"{one} --alter --delete-config {changed}"))
        each(sides, lambda b: ok(b, f"{default} --alter --delete-config log.retention.ms"))
    # Every broker, then the cluster's default.
    b = cluster.bootstrap
    headers = [
        line
        for line in ok(b, "kafka-configs --describe --entity-type brokers").splitlines()
        if not line.startswith("  ")
    ]
    assert headers == [
        "Dynamic configs for broker 1 are:",
        "Dynamic configs for broker 2 are:",
        "Dynamic configs for broker 3 are:",
        "Default configs for brokers in the cluster are:",
    ]
    assert ok(b, f"{one} --describe") == "Dynamic configs for broker 1 are:\n"
    assert ok(b, f"{default} --describe") == "Default configs for brokers in the cluster are:\n"


def test_configs_of_client_quotas(sides: Sides) -> None:
    user = "kafka-configs --entity-type users --entity-name alice"
    both(
        sides,
        "quotas: alter a user",
        f"{user} --alter --add-config producer_byte_rate=1024,consumer_byte_rate=2048",
    )
    both(
        sides,
        "quotas: alter the default client",
        "kafka-configs --entity-type clients --entity-default --alter "
        "--add-config request_percentage=50",
    )
    both(
        sides,
        "quotas: alter a user's client",
        f"{user} --entity-type clients --entity-name app1 --alter "
        "--add-config producer_byte_rate=512",
    )
    users = both(sides, "quotas: describe users", "kafka-configs --describe --entity-type users")
    assert users == (
        "Quota configs for user-principal 'alice' are "
        "consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n"
    )
    assert both(
        sides, "quotas: describe clients", "kafka-configs --describe --entity-type clients"
    ) == ("Quota configs for the default client-id are request_percentage=50.0\n")
    assert both(
        sides, "quotas: describe a user's clients", f"{user} --entity-type clients --describe"
    ) == (
        "Quota configs for user-principal 'alice', client-id 'app1' are producer_byte_rate=512.0\n"
    )
    both(sides, "quotas: delete", f"{user} --alter --delete-config consumer_byte_rate")
    assert both(sides, "quotas: after the delete", f"{user} --describe") == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
    )


# -- kafka-consumer-groups, kafka-console-producer and -consumer ---------------------------------


def test_consumer_groups(sides: Sides, cluster: LocalCluster) -> None:
    def keyed_records(bootstrap: str) -> str:
        ok(bootstrap, "kafka-topics --create --topic cg --partitions 3 --replication-factor 1")
        keyed = ["parse.key=true", "key.separator=:"]
        produce(bootstrap, "cg", ["k1:v1", "k2:v2", "k3:v3", "k4:v4"], *keyed)
        return ok(
            bootstrap,
            "kafka-console-consumer --topic cg --group cg1 --from-beginning --max-messages 4 "
            "--formatter-property print.key=true --formatter-property print.partition=true",
        )

    # Partitions come in any order: the records of each, in order, are what counts.
    for consumed in each(sides, keyed_records):
        assert sorted(consumed.splitlines()) == [
            "Partition:0\tk2\tv2",
            "Partition:1\tk3\tv3",
            "Partition:1\tk4\tv4",
            "Partition:2\tk1\tv1",
        ]
    groups = "kafka-consumer-groups"
    listed = rows(
        both(
            sides,
            "groups: list --state --type",
            f"{groups} --list --state --type",
            rows_of="cg1",
        )
    )
    assert ["cg1", "Classic", "Empty"] in listed
    # (stderr says "Consumer group 'cg1' has no active members.")
    described = rows(both(sides, "groups: describe", f"{groups} --describe --group cg1"))
    assert [r[:6] for r in described[1:]] == [
        ["cg1", "cg", "0", "1", "1", "0"],
        ["cg1", "cg", "1", "2", "2", "0"],
        ["cg1", "cg", "2", "1", "1", "0"],
    ]
    for view in ("--offsets --verbose", "--state"):
        both(sides, f"groups: describe {view}", f"{groups} --describe --group cg1 {view}")
    reset = both(
        sides,
        "groups: reset --to-earliest --execute",
        f"{groups} --reset-offsets --group cg1 --topic cg --to-earliest --execute",
    )
    assert sorted(r[1:] for r in rows(reset)[1:]) == [["cg", p, "0"] for p in "012"]
    both(
        sides,
        "groups: reset --shift-by --dry-run",
        f"{groups} --reset-offsets --group cg1 --all-topics --shift-by 1 --dry-run",
    )
    exported = both(
        sides,
        "groups: reset --export",
        f"{groups} --reset-offsets --group cg1 --topic cg:1 --to-latest --dry-run --export",
    )
    assert exported == "cg,1,2\n\n"  # topic,partition,offset (--from-file reads it back)
    both(sides, "groups: delete offsets", f"{groups} --delete-offsets --group cg1 --topic cg:1")
    both(sides, "groups: describe after delete offsets", f"{groups} --describe --group cg1")
    both(sides, "groups: delete", f"{groups} --delete --group cg1")
    again = both(sides, "groups: delete again", f"{groups} --delete --group cg1")  # exits 0
    assert again.splitlines()[1:] == [
        "Error: Deletion of some consumer groups failed:",
        "* Group 'cg1' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.",
    ]

    # An active member of a KIP-848 group, as describe shows it and reset refuses it.
    b = cluster.bootstrap
    member = subprocess.Popen(
        java_command(
            "kafka-console-consumer",
            *shlex.split(
                f"--bootstrap-server {b} --topic cg --group cg2 --consumer-property "
                "group.protocol=consumer --consumer-property client.id=console-1"
            ),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def state() -> list[str]:
        """ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS (none while
        the group does not exist yet)."""
        out = rows(ok(b, f"{groups} --describe --group cg2 --state"))
        return out[1][3:] if len(out) > 1 else []

    try:
        wait_for(lambda: state()[:2] == ["uniform", "Stable"], what="a stable group")
        assert state()[-1] == "1"  # #MEMBERS
        members = rows(ok(b, f"{groups} --describe --group cg2 --members --verbose"))
        assert members[0] == [
            "GROUP",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT",
        ]
        row = members[1]
        assert row[0] == "cg2"
        assert row[2:5] == ["/127.0.0.1", "console-1", "3"]
        assert row[6] == row[8] == "cg:0,1,2"
        assert row[5] == row[7]
        offsets = rows(ok(b, f"{groups} --describe --group cg2"))
        assert [(r[2], r[-1]) for r in offsets[1:]] == [(p, "console-1") for p in "012"]
        refused = ok(b, f"{groups} --reset-offsets --group cg2 --topic cg --to-earliest --execute")
        assert refused.splitlines()[1] == (
            "Error: Assignments can only be reset if the group 'cg2' is inactive, but the "
            "current state is Stable."
        )
    finally:
        member.terminate()
        member.wait(30)
    wait_for(lambda: state()[:2] == ["uniform", "Empty"], what="the member to leave")


def test_classic_group_with_a_member(sides: Sides) -> None:
    """A console consumer in a classic group, as describe shows its member and assignment."""

    def start_member(bootstrap: str) -> subprocess.Popen[bytes]:
        ok(bootstrap, "kafka-topics --create --topic classic --partitions 2 --replication-factor 1")
        options = (
            f"--bootstrap-server {bootstrap} --topic classic --group cg3 "
            "--consumer-property client.id=classic-1 "
            "--consumer-property auto.commit.interval.ms=200"
        )
        return subprocess.Popen(
            java_command("kafka-console-consumer", *shlex.split(options)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    members = each(sides, start_member)
    groups = "kafka-consumer-groups --describe --group cg3"
    try:
        for bootstrap in (sides.kafka, sides.rafka):
            # Stable, and its first auto-commit done (offset 0 of the empty partitions).
            def first_commit(b: str = bootstrap) -> bool:
                return [r[3] for r in rows(ok(b, groups))[1:]] == ["0", "0"]

            wait_for(first_commit, what="the member's first commit")
        state = rows(both(sides, "classic group: describe --state", f"{groups} --state"))
        assert state[1][3:] == ["range", "Stable", "1"]
        described = rows(
            both(
                sides,
                "classic group: describe --members --verbose",
                f"{groups} --members --verbose",
            )
        )
        # CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT: "-" but the current
        assert described[1][2:] == ["/127.0.0.1", "classic-1", "2", "-", "classic:0,1", "-", "-"]
        both(sides, "classic group: describe", groups)
    finally:
        for member in members:
            member.terminate()
            member.wait(30)


def test_console_producer_and_consumer(cluster: LocalCluster) -> None:
    """Keys and headers through the console tools, read back with what the formatter
    prints of each record."""
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic console --partitions 2")
    lines = ["h1:a,h2:b\tk1\tone", "h1:c\tk2\ttwo", "h3:\tk3\tthree"]
    produce(b, "console", lines, "parse.key=true", "parse.headers=true")
    printed = ok(
        b,
        "kafka-console-consumer --topic console --from-beginning --max-messages 3 "
        "--formatter-property print.key=true --formatter-property print.headers=true "
        "--formatter-property print.partition=true",
    )
    records = sorted((line.split("\t") for line in printed.splitlines()), key=lambda r: r[2])
    assert [r[1:] for r in records] == [
        ["h1:a,h2:b", "k1", "one"],
        ["h1:c", "k2", "two"],
        ["h3:", "k3", "three"],
    ]
    partition = records[0][0].removeprefix("Partition:")
    first = ok(
        b,
        f"kafka-console-consumer --topic console --partition {partition} --offset 0 "
        "--max-messages 1",
    )
    assert first == "one\n"


def test_cluster_id_and_broker_api_versions(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    cluster_id = run_tool("kafka-cluster", "cluster-id", "--bootstrap-server", b)
    assert re.fullmatch(r"Cluster ID: \S+\n", cluster_id.stdout), cluster_id
    listed = ok(b, "kafka-broker-api-versions")
    brokers = re.findall(
        r"^127\.0\.0\.1:\d+ \(id: (\d+) rack: null isFenced: false\) -> \($", listed, re.M
    )
    assert sorted(brokers) == ["1", "2", "3"]
    # What Kafka's tools need is served by every broker (`Name(key): min to max [usable: v]`).
    for api in (
        "ListOffsets(2)",
        "WriteTxnMarkers(27)",
        "DescribeProducers(61)",
        "ElectLeaders(43)",
        "AlterPartitionReassignments(45)",
        "DescribeLogDirs(35)",
        "UpdateFeatures(57)",
        "DescribeShareGroupOffsets(90)",
        "AlterShareGroupOffsets(91)",
        "ListConfigResources(74)",
    ):
        served = re.findall(rf"^\t{re.escape(api)}: (.*?),?$", listed, re.M)
        assert len(served) == 3, (api, served)
        assert "UNSUPPORTED" not in served, (api, served)


# -- kafka-share-groups, kafka-console-share-consumer -------------------------------------------


def test_share_groups(sides: Sides) -> None:
    def share_records(bootstrap: str) -> None:
        # (Rafka's lag needs a replica on the coordinator: every broker has one with RF 3)
        factor = 1 if bootstrap == sides.kafka else 3
        create = f"kafka-topics --create --topic sh --partitions 3 --replication-factor {factor}"
        ok(bootstrap, create)
        keyed = ["parse.key=true", "key.separator=:"]
        produce(bootstrap, "sh", ["k1:v1", "k2:v2", "k3:v3", "k4:v4"], *keyed)

    each(sides, share_records)
    both(
        sides,
        "share: group config",
        "kafka-configs --alter --entity-type groups --entity-name sg1 "
        "--add-config share.auto.offset.reset=earliest",
    )
    described = both(
        sides,
        "share: group config describe",
        "kafka-configs --describe --entity-type groups --entity-name sg1",
    )
    assert described == (
        "Dynamic configs for group sg1 are:\n  share.auto.offset.reset=earliest sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
        "DEFAULT_CONFIG:share.auto.offset.reset=latest}\n"
    )
    # Every config Rafka has, its value and synonyms (the broker setting of its default) as
    # Kafka's; Kafka 4.4 has more (assignment intervals, dead-letter queues).
    describe_all = "kafka-configs --describe --entity-type groups --entity-name sg1 --all"
    assert len(both_configs(sides, "share: group configs --all", describe_all)) == 13
    consume = "kafka-console-share-consumer --topic sh --group sg1 --max-messages 4"
    kafka, rafka = each(sides, lambda bootstrap: ok(bootstrap, consume))
    assert sorted(rafka.split()) == sorted(kafka.split()) == ["v1", "v2", "v3", "v4"]
    shares = "kafka-share-groups"
    listed = both(sides, "share: list --state", f"{shares} --list --state", rows_of="sg1")
    assert ["sg1", "Empty"] in rows(listed)
    done = both(sides, "share: describe, all consumed", f"{shares} --describe --group sg1")
    # GROUP TOPIC PARTITION START-OFFSET LAG
    assert [r[1:] for r in rows(done)[1:]] == [
        ["sh", "0", "1", "0"],
        ["sh", "1", "2", "0"],
        ["sh", "2", "1", "0"],
    ]
    state = rows(both(sides, "share: describe --state", f"{shares} --describe --group sg1 --state"))
    assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
    assert [state[1][0], *state[1][3:]] == ["sg1", "Empty", "0"]
    both(
        sides,
        "share: reset --to-earliest --execute",
        f"{shares} --reset-offsets --group sg1 --topic sh --to-earliest --execute",
    )
    again = both(sides, "share: describe after the reset", f"{shares} --describe --group sg1")
    assert [r[1:] for r in rows(again)[1:]] == [
        ["sh", "0", "0", "1"],
        ["sh", "1", "0", "2"],
        ["sh", "2", "0", "1"],
    ]
    both(sides, "share: delete offsets", f"{shares} --delete-offsets --group sg1 --topic sh")
    both(sides, "share: describe after delete offsets", f"{shares} --describe --group sg1")
    both(sides, "share: delete", f"{shares} --delete --group sg1")
    assert "sg1" not in ok(sides.rafka, f"{shares} --list").split()


# -- kafka-streams-groups -----------------------------------------------------------------------


def test_streams_groups(sides: Sides) -> None:
    """A streams group with one member (a Streams client's heartbeat), then once it left:
    list, describe (lag, members, state), reset and delete offsets, delete with its internal
    topics."""
    streams, group = "kafka-streams-groups", "stg"

    def member(bootstrap: str, epoch: int) -> None:
        """The member's heartbeat, sent to the group's coordinator."""
        with KafkaConnection.to_any(bootstrap) as conn:
            found = wait_for(
                lambda: next(
                    (
                        c
                        for c in conn.call(
                            10, 4, key_type=0, coordinator_keys=(group,)
                        ).coordinators
                        if c.error_code == 0
                    ),
                    None,
                ),
                60,
                "the group's coordinator",
            )
        with KafkaConnection(found.port, found.host) as conn:
            fields = heartbeat(group, "streams-member-1", epoch, 1, source="st")
            answer = wait_for(
                lambda: (a := conn.call(HEARTBEAT, 1, **fields)).error_code != 14 and a,
                60,
                "the coordinator loaded",
            )
            assert answer.error_code == 0, answer

    def start(bootstrap: str) -> None:
        ok(bootstrap, "kafka-topics --create --topic st --partitions 2 --replication-factor 1")
        # one key: the same partition on both (unkeyed records go to a random one)
        keyed = ["parse.key=true", "key.separator=:"]
        produce(bootstrap, "st", ["k:a", "k:b", "k:c"], *keyed)
        # committed offsets of the (still simple) group; a Streams member then takes the id
        ok(
            bootstrap,
            f"kafka-consumer-groups --group {group} --topic st --reset-offsets "
            "--to-earliest --execute",
        )
        member(bootstrap, 0)

    each(sides, start)
    assert group in rows(both(sides, "streams: list", f"{streams} --list", rows_of=group))[0]
    both(sides, "streams: list --state", f"{streams} --list --state", rows_of=group)
    described = both(sides, "streams: describe (lag)", f"{streams} --describe --group {group}")
    assert rows(described)[0] == ["GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"]
    both(
        sides,
        "streams: describe --members --verbose",
        f"{streams} --describe --group {group} --members --verbose",
    )
    both(
        sides,
        "streams: describe --state --verbose",
        f"{streams} --describe --group {group} --state --verbose",
    )
    both(sides, "streams: describe --offsets", f"{streams} --describe --group {group} --offsets")
    refused = both(
        sides,
        "streams: reset while a member is active",
        f"{streams} --reset-offsets --group {group} --input-topic st --to-latest --execute",
    )
    assert "can only be reset if the group 'stg' is inactive" in refused
    each(sides, lambda bootstrap: member(bootstrap, -1))
    both(
        sides,
        "streams: reset --to-latest --execute",
        f"{streams} --reset-offsets --group {group} --input-topic st --to-latest --execute",
    )
    both(
        sides,
        "streams: delete offsets",
        f"{streams} --delete-offsets --group {group} --input-topic st",
    )
    both(
        sides,
        "streams: delete with its internal topics",
        f"{streams} --delete --group {group} --delete-all-internal-topics",
    )
    assert group not in ok(sides.rafka, f"{streams} --list").split()


# -- kafka-transactions -------------------------------------------------------------------------


def test_transactions_list_describe_abort(cluster: LocalCluster) -> None:
    """An open transaction as the tool lists and describes it, then aborted by an operator:
    the marker it writes lets read_committed consumers past the transaction's records."""
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic txn --partitions 1")
    produce(b, "txn", ["plain-0", "plain-1"])  # offsets 0 and 1
    producer = Producer(
        {"bootstrap.servers": b, "transactional.id": "ops-tx", "transaction.timeout.ms": 600000}
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn", value=b"txn-%d" % i)  # offsets 2, 3 and 4
        producer.flush()

        listed = {r[0]: r for r in rows(ok(b, "kafka-transactions list"))}
        assert listed["TransactionalId"] == [
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "TransactionState",
        ]
        coordinator, pid, state = listed["ops-tx"][1:]
        assert state == "Ongoing"
        described = rows(ok(b, "kafka-transactions describe --transactional-id ops-tx"))
        assert described[0] == [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ]
        assert described[1][:6] == [coordinator, "ops-tx", pid, "0", "Ongoing", "600000"]
        assert described[1][8] == "txn-0"

        def producers() -> dict[str, list[str]]:
            out = rows(ok(b, "kafka-transactions describe-producers --topic txn --partition 0"))
            assert out[0] == [
                "ProducerId",
                "ProducerEpoch",
                "LatestCoordinatorEpoch",
                "LastSequence",
                "LastTimestamp",
                "CurrentTransactionStartOffset",
            ]
            return {r[0]: r for r in out[1:]}

        found = producers()[pid]
        assert found[1:4] == ["0", "-1", "2"]
        assert found[5] == "2"
        # Its coordinator knows the partition is in it: not hanging.
        hanging = [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
        find = "kafka-transactions find-hanging --topic txn --max-transaction-timeout 0"
        assert rows(ok(b, find)) == [hanging]

        def read_committed(options: str) -> list[str]:
            consume = "kafka-console-consumer --topic txn --partition 0 --offset earliest"
            out = tool(b, f"{consume} --isolation-level read_committed {options}")
            return out.stdout.split()

        # Held back by the open transaction: two records, then nothing for 3 s.
        assert read_committed("--timeout-ms 3000") == ["plain-0", "plain-1"]
        abort = "kafka-transactions abort --topic txn --partition 0 --start-offset 2"
        assert ok(b, abort) == ""
        found = producers()[pid]
        assert found[1:4] == ["0", "0", "2"]
        assert found[5] == "None"
        produce(b, "txn", ["plain-6"])  # after the abort marker at offset 5
        after = read_committed("--max-messages 3 --timeout-ms 30000")
        assert after == ["plain-0", "plain-1", "plain-6"]
    finally:
        producer.abort_transaction()  # its coordinator still has it open


# -- kafka-reassign-partitions, kafka-leader-election, kafka-log-dirs ---------------------------


def test_reassign_partitions_with_throttle(cluster: LocalCluster, tmp_path: Path) -> None:
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic moving --replica-assignment 1:2,2:3")
    produce(
        b, "moving", [f"{i}:record-{i}" for i in range(50)], "parse.key=true", "key.separator=:"
    )
    move = tmp_path / "topics.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    generated = ok(
        b,
        "kafka-reassign-partitions --generate --broker-list 1,2,3 --topics-to-move-json-file",
        str(move),
    ).splitlines()
    assert generated[0] == "Current partition replica assignment"
    current = json.loads(generated[1])["partitions"]
    assert [(p["partition"], p["replicas"]) for p in current] == [(0, [1, 2]), (1, [2, 3])]
    assert [Path(d).name for d in current[0]["log_dirs"]] == ["broker-1", "broker-2"]
    assert generated[3] == "Proposed partition reassignment configuration"
    for p in json.loads(generated[4])["partitions"]:
        assert len(set(p["replicas"])) == 2
        assert set(p["replicas"]) <= {1, 2, 3}

    plan = tmp_path / "plan.json"
    moves = [(0, [3, 2]), (1, [2, 1])]
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "moving", "partition": p, "replicas": r} for p, r in moves
                ],
            }
        )
    )
    reassign = "kafka-reassign-partitions --reassignment-json-file"
    # KIP-860: a plan that changes a partition's replica count, refused when asked to keep it.
    grow = tmp_path / "grow.json"
    growing = {"topic": "moving", "partition": 0, "replicas": [1, 2, 3]}
    grow.write_text(json.dumps({"version": 1, "partitions": [growing]}))
    refused = fails(b, f"{reassign} {grow} --execute --disallow-replication-factor-change")
    assert refused.splitlines()[-2:] == [
        "Error reassigning partition(s):",
        "moving-0: The replication factor is changed from 2 to 3",
    ]
    executed = ok(b, f"{reassign} {plan} --execute --throttle 10000000").splitlines()
    assert executed[0] == "Current partition replica assignment"
    assert executed[3:] == [
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 10000000 B/s",
        "Successfully started partition reassignments for moving-0,moving-1",
    ]
    # The throttles stay until --verify sees the moves done.
    topic_configs = "kafka-configs --describe --entity-type topics --entity-name moving"
    throttled = ok(b, topic_configs)
    assert "  follower.replication.throttled.replicas=0:3,1:1 " in throttled
    assert "  leader.replication.throttled.replicas=0:1,0:2,1:2,1:3 " in throttled
    rates = ok(b, "kafka-configs --describe --entity-type brokers")  # each broker's, then default
    for kind in ("leader", "follower"):
        assert rates.count(f"  {kind}.replication.throttled.rate=10000000 ") == 3

    def verify() -> list[str]:
        return ok(b, f"{reassign} {plan} --verify").splitlines()

    wait_for(lambda: verify()[2].endswith("is completed."), what="the moves")
    assert verify() == [
        "Status of partition reassignment:",
        "Reassignment of partition moving-0 is completed.",
        "Reassignment of partition moving-1 is completed.",
        "",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic moving",
    ]
    assert ok(b, topic_configs) == "Dynamic configs for topic moving are:\n"
    assert "throttled" not in ok(b, "kafka-configs --describe --entity-type brokers")
    assert ok(b, "kafka-reassign-partitions --list") == "No partition reassignments found.\n"
    placed = describe_topic(b, "moving")[1:]
    assert [(r[7], sorted(r[9].split(","))) for r in placed] == [
        ("3,2", ["2", "3"]),
        ("2,1", ["1", "2"]),
    ]

    # Where each replica's log is now, with its data.
    out = ok(b, "kafka-log-dirs --describe --topic-list moving").splitlines()
    assert out[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1,2,3",
    ]
    sizes = {
        (broker["broker"], p["partition"]): p["size"]
        for broker in json.loads(out[2])["brokers"]
        for log_dir in broker["logDirs"]
        for p in log_dir["partitions"]
    }
    assert sorted(sizes) == [(1, "moving-1"), (2, "moving-0"), (2, "moving-1"), (3, "moving-0")]
    assert sizes[(3, "moving-0")] == sizes[(2, "moving-0")] > 0

    # Reordering partition 0's replicas keeps its leader (3); a preferred election then moves
    # leadership to the new first replica (2).
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]}
        )
    )
    ok(b, f"{reassign} {plan} --execute")
    wait_for(lambda: describe_topic(b, "moving")[1][7] == "2,3", what="the reorder")
    assert describe_topic(b, "moving")[1][5] == "3"
    elect = "kafka-leader-election --topic moving --election-type"
    assert ok(b, f"{elect} preferred --partition 0") == (
        "Successfully completed leader election (PREFERRED) for partitions moving-0\n"
    )
    assert describe_topic(b, "moving")[1][5] == "2"
    assert ok(b, f"{elect} preferred --partition 0") == (
        "Valid replica already elected for partitions moving-0\n"
    )
    assert ok(b, f"{elect} unclean --partition 1") == (
        "Valid replica already elected for partitions moving-1\n"
    )
    # Every partition whose leader is not its first replica (after a broker's restart, until
    # the meta service's periodic rebalance) gets it back; then none needs an election.
    all_preferred = "kafka-leader-election --election-type preferred --all-topic-partitions"
    moved = ok(b, all_preferred)
    assert moved == "" or moved.startswith(
        "Successfully completed leader election (PREFERRED) for partitions "
    ), moved
    assert ok(b, all_preferred) == ""


def test_leader_election_errors(sides: Sides) -> None:
    both_fail(
        sides,
        "leader election: unknown topic",
        "kafka-leader-election --election-type preferred --topic nope --partition 1",
    )


# -- kafka-metadata-quorum, kafka-features, kafka-client-metrics --------------------------------


def test_metadata_quorum(cluster: LocalCluster) -> None:
    with KafkaConnection.to_any(cluster.bootstrap) as conn:
        answer = conn.call(
            API_VERSIONS, 3, client_software_name="tests", client_software_version="1"
        )
    if DESCRIBE_QUORUM not in {k.api_key for k in answer.api_keys}:
        pytest.skip("the brokers do not serve DescribeQuorum (55) yet (issue 26)")
    b = cluster.bootstrap
    status = ok(b, "kafka-metadata-quorum describe --status").splitlines()
    fields = dict(line.split(":", 1) for line in status)
    assert list(fields) == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert int(fields["LeaderEpoch"]) >= 0
    assert int(fields["HighWatermark"]) >= 0
    voters = json.loads(fields["CurrentVoters"])
    assert int(fields["LeaderId"]) in {v["id"] for v in voters}
    replication = rows(ok(b, "kafka-metadata-quorum describe --replication"))
    assert replication[0] == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert [r[-1] for r in replication[1:]].count("Leader") == 1


def test_features(cluster: LocalCluster) -> None:
    b = cluster.bootstrap

    def described() -> dict[str, list[str]]:
        # Feature: group.version  SupportedMinVersion: 0  SupportedMaxVersion: 1
        #   FinalizedVersionLevel: 1  Epoch: 3
        return {r[1]: r[2:] for r in rows(ok(b, "kafka-features describe"))}

    before = described()
    assert sorted(before) == ["group.version", "streams.version", "transaction.version"]
    levels = ["SupportedMinVersion:", "0", "SupportedMaxVersion:"]
    assert before["group.version"][:6] == [*levels, "1", "FinalizedVersionLevel:", "1"]
    assert before["transaction.version"][:6] == [*levels, "2", "FinalizedVersionLevel:", "2"]
    assert ok(b, "kafka-features upgrade --feature transaction.version=2 --dry-run") == (
        "transaction.version can be upgraded to 2.\n"
    )
    assert ok(b, "kafka-features downgrade --feature group.version=0 --dry-run") == (
        "group.version can be downgraded to 0.\n"
    )
    assert fails(b, "kafka-features upgrade --feature transaction.version=9").splitlines() == [
        "Could not upgrade transaction.version to 9. The update failed for all features since "
        "the following feature had an error: Invalid update version 9 for feature "
        "transaction.version. The meta service only supports versions 0-2",
        "1 out of 1 operation(s) failed.",
    ]
    assert ok(b, "kafka-features downgrade --feature transaction.version=1") == (
        "transaction.version was downgraded to 1.\n"
    )
    try:
        after = described()["transaction.version"]
        assert after[5] == "1"
        assert int(after[7]) > int(before["transaction.version"][7])
    finally:
        assert ok(b, "kafka-features upgrade --feature transaction.version=2") == (
            "transaction.version was upgraded to 2.\n"
        )


def test_client_metrics(sides: Sides) -> None:
    metrics = "kafka-client-metrics"
    altered = both(
        sides,
        "client metrics: alter",
        f"{metrics} --alter --name cm1 --metrics org.apache.kafka.producer. --interval 5000 "
        "--match client_id=app1",
    )
    assert altered == "Altered client metrics config for cm1.\n"
    assert "cm1" in both(sides, "client metrics: list", f"{metrics} --list").split()
    assert both(sides, "client metrics: describe", f"{metrics} --describe --name cm1") == (
        "Client metrics configs for cm1 are:\n"
        "  interval.ms=5000\n"
        "  match=client_id=app1\n"
        "  metrics=org.apache.kafka.producer.\n"
    )
    both(sides, "client metrics: delete", f"{metrics} --delete --name cm1")
    assert "cm1" not in ok(sides.rafka, f"{metrics} --list").split()


# -- kafka-get-offsets --------------------------------------------------------------------------


def test_get_offsets(sides: Sides) -> None:
    """Every offset spec GetOffsetShell knows, on records with set timestamps."""

    def timed_records(bootstrap: str) -> None:
        ok(bootstrap, "kafka-topics --create --topic offs --partitions 2 --replication-factor 1")
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for partition, timestamps in ((0, [1000, 3000, 2000]), (1, [5000])):
            for ts in timestamps:
                producer.produce("offs", value=b"x", partition=partition, timestamp=ts)
                producer.flush()

    each(sides, timed_records)
    specs = ["-1", "-2", "-3", "-4", "-5", "-6", "2500", "9999"]
    answers = {
        spec: both(
            sides, f"get offsets --time {spec}", f"kafka-get-offsets --topic offs --time {spec}"
        )
        for spec in specs
    }
    assert answers["-1"] == "offs:0:3\noffs:1:1\n"
    assert answers["-3"] == answers["2500"] == "offs:0:1\noffs:1:0\n"
    assert answers["-5"] == answers["-6"] == answers["9999"] == ""  # nothing tiered, nothing later
    both(sides, "get offsets --topic-partitions", "kafka-get-offsets --topic-partitions offs:1")


# -- perf tests, the verifiable producer and consumer -------------------------------------------


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


# -- kafka-acls, kafka-delegation-tokens: a SASL_SSL cluster with an authorizer -----------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    with secured_cluster(tmp_path_factory.mktemp("kafka-tools-secured"), brokers=1) as s:
        yield s


_LOGIN = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def command_config(
    secured: SecuredCluster, path: Path, user: str, mechanism: str, password: str | None = None
) -> str:
    """A --command-config file: SASL_SSL with `user`'s password (the test principals' own by
    default), trusting the cluster's CA."""
    password = secured.credentials(user, mechanism, password)["password"]
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca}\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={_LOGIN[mechanism]} required username="{user}" password="{password}";\n'
    )
    return f"--command-config {path}"


def acl_blocks(text: str) -> dict[str, set[str]]:
    """Each `... ACLs for resource `<pattern>`:` block: pattern -> its ACLs (in any order)."""
    out: dict[str, set[str]] = {}
    resource = ""
    for line in text.splitlines():
        if " ACLs for resource `" in line:
            resource = line.split("`")[1]
            out[resource] = set()
        elif line.strip().startswith("(principal="):
            out[resource].add(line.strip())
    return out


def test_acls(secured: SecuredCluster, tmp_path: Path) -> None:
    b = secured.bootstrap
    admin = command_config(secured, tmp_path / "admin.properties", "admin", "PLAIN")
    writer = command_config(secured, tmp_path / "writer.properties", "writer", "SCRAM-SHA-256")
    ok(b, f"kafka-topics {admin} --create --topic secret --partitions 1")
    acls = f"kafka-acls {admin}"
    added = ok(
        b,
        f"{acls} --add --allow-principal User:writer --operation Write --operation Describe "
        "--topic secret",
    )
    topic = "ResourcePattern(resourceType=TOPIC, name=secret, patternType=LITERAL)"
    group = "ResourcePattern(resourceType=GROUP, name=readers, patternType=LITERAL)"
    prefixed = "ResourcePattern(resourceType=TOPIC, name=out-, patternType=PREFIXED)"

    def w(op: str) -> str:
        return f"(principal=User:writer, host=*, operation={op}, permissionType=ALLOW)"

    def r(op: str) -> str:
        return f"(principal=User:reader, host=*, operation={op}, permissionType=ALLOW)"

    assert acl_blocks(added) == {topic: {w("WRITE"), w("DESCRIBE")}}
    ok(b, f"{acls} --add --allow-principal User:reader --consumer --topic secret --group readers")
    ok(
        b,
        f"{acls} --add --allow-principal User:writer --producer --topic out- "
        "--resource-pattern-type prefixed",
    )
    assert acl_blocks(ok(b, f"{acls} --list")) == {
        topic: {w("WRITE"), w("DESCRIBE"), r("READ"), r("DESCRIBE")},
        group: {r("READ")},
        prefixed: {w("WRITE"), w("DESCRIBE"), w("CREATE")},
    }
    by_reader = ok(b, f"{acls} --list --principal User:reader")
    assert by_reader.splitlines()[0] == "ACLs for principal `User:reader`"
    assert acl_blocks(by_reader) == {topic: {r("READ"), r("DESCRIBE")}, group: {r("READ")}}

    # The writer may write to `secret`, but not to a topic nobody let it write to.
    as_writer = f"kafka-console-producer {writer.replace('--command-config', '--producer.config')}"
    ok(b, f"{as_writer} --topic secret", input="allowed\n")
    ok(b, f"kafka-topics {admin} --create --topic closed --partitions 1")
    refused = tool(b, f"{as_writer} --topic closed", input="refused\n")
    assert "Not authorized to access topics: [closed]" in refused.stderr, refused.stderr
    # Aborting a transaction writes its marker: for the cluster's operators only.
    abort = "abort --topic secret --partition 0 --producer-id 5 --producer-epoch 0"
    denied = fails(b, f"kafka-transactions {writer} {abort} --coordinator-epoch 0")
    spec = "AbortTransactionSpec(topicPartition=secret-0, producerId=5, producerEpoch=0, "
    spec += "coordinatorEpoch=0)"
    assert denied == (
        f"Failed to abort transaction {spec}: WriteTxnMarkers request with {spec} failed due to "
        "cluster authorization error. Enable debug logging for additional detail."
    ), denied
    remove = "--remove --force --allow-principal User:writer --operation Write --topic secret"
    assert ok(b, f"{acls} {remove}") == ""
    after = ok(b, f"{acls} --list --topic secret")
    assert acl_blocks(after) == {topic: {w("DESCRIBE"), r("READ"), r("DESCRIBE")}}


def test_scram_users(secured: SecuredCluster, tmp_path: Path) -> None:
    """SCRAM credentials set and removed with kafka-configs, as the user then logs in."""
    b = secured.bootstrap
    admin = command_config(secured, tmp_path / "admin.properties", "admin", "PLAIN")
    carol = f"kafka-configs {admin} --entity-type users --entity-name carol"
    for mechanism in (
        "SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
        "SCRAM-SHA-512=[password=carol-secret]",
    ):
        assert ok(b, f"{carol} --alter --add-config {mechanism}") == (
            "Completed updating config for user carol.\n"
        )
    assert ok(b, f"{carol} --describe") == (
        "SCRAM credential configs for user-principal 'carol' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    # One change per user and request, as Kafka's controller allows.
    both_at_once = "SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=y]"
    assert (
        "DuplicateResourceException: A user credential cannot be altered twice in the same request"
        in fails(b, f"{carol} --alter --add-config {both_at_once}")
    )
    login = command_config(
        secured, tmp_path / "carol.properties", "carol", "SCRAM-SHA-256", "carol-secret"
    )
    assert ok(b, f"kafka-topics {login} --list").strip() == ""  # no topic it may see
    ok(b, f"{carol} --alter --delete-config SCRAM-SHA-256")
    assert ok(b, f"{carol} --describe") == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096\n"
    )
    assert fails(b, f"kafka-topics {login} --list").splitlines()[0] == (
        "Error while executing topic command : Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )


def test_delegation_tokens(secured: SecuredCluster, tmp_path: Path) -> None:
    b = secured.bootstrap
    admin = command_config(secured, tmp_path / "admin.properties", "admin", "PLAIN")
    writer = command_config(secured, tmp_path / "writer.properties", "writer", "SCRAM-SHA-256")
    tokens = "kafka-delegation-tokens"
    created = ok(
        b, f"{tokens} {admin} --create --max-life-time-period -1 --renewer-principal User:writer"
    ).splitlines()
    assert (
        created[0]
        == "Calling create token operation with renewers :[User:writer] , max-life-time-period :-1"
    )
    token_id = created[1].removeprefix("Created delegation token with tokenId : ")
    header = [
        "TOKENID",
        "HMAC",
        "OWNER",
        "REQUESTER",
        "RENEWERS",
        "ISSUEDATE",
        "EXPIRYDATE",
        "MAXDATE",
    ]
    assert rows("\n".join(created[2:]))[0] == header
    token = rows("\n".join(created[2:]))[1]
    assert token[0] == token_id
    assert token[2:5] == ["User:admin", "User:admin", "[User:writer]"]
    hmac = token[1]

    def described() -> list[list[str]]:
        out = ok(b, f"{tokens} {admin} --describe --owner-principal User:admin").splitlines()
        assert out[0] == "Calling describe token operation for owners: [User:admin]"
        assert out[1] == f"Total number of tokens : {len(rows(chr(10).join(out[3:])))}"
        return rows("\n".join(out[3:]))

    assert [t[:5] for t in described()] == [token[:5]]
    # Without owners the tool asks for an empty list of them, which matches no token (Kafka's
    # DelegationTokenManager.filterToken).
    assert ok(b, f"{tokens} {admin} --describe").splitlines()[:2] == [
        "Calling describe token operation for current user.",
        "Total number of tokens : 0",
    ]
    renewed = ok(b, f"{tokens} {writer} --renew --hmac {hmac} --renew-time-period 3600000")
    assert re.fullmatch(
        r"Calling renew token operation with hmac :\S+ , renew-time-period :3600000\n"
        r"Completed renew operation\. New expiry date : \d{4}-\d\d-\d\dT\d\d:\d\d",
        renewed,
    ), renewed
    expired = ok(b, f"{tokens} {admin} --expire --hmac {hmac} --expiry-time-period -1")
    assert "Completed expire operation. New expiry date : " in expired
    assert described() == []
    gone = fails(b, f"{tokens} {writer} --renew --hmac {hmac} --renew-time-period 1000")
    assert "DelegationTokenNotFoundException: Delegation Token is not found on server." in gone
