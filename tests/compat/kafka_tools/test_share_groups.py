"""kafka-share-groups and kafka-console-share-consumer: a share group's config, consuming,
list, describe, reset and delete offsets, delete.
"""

from __future__ import annotations

from tests.compat.kafka_tools.support import Sides, both, both_configs, each, ok, produce, rows


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
