"""kafka-consumer-groups (classic and KIP-848 groups, with and without members: list,
describe, reset and delete offsets, delete), the console producer and consumer, and
kafka-get-offsets.
"""

from __future__ import annotations

import shlex
import subprocess

from confluent_kafka import Producer

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import Sides, both, each, ok, produce, rows
from tests.integration.conftest import wait_for
from tests.peers.kafka_tools import java_command

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
