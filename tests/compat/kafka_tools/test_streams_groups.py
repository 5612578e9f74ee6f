"""kafka-streams-groups: a streams group with one member, then once it left."""

from __future__ import annotations

from cluster.kafka_client import KafkaConnection
from tests.compat.kafka_tools.support import Sides, both, each, ok, produce, rows
from tests.compat.streams_requests import HEARTBEAT, heartbeat
from tests.integration.conftest import wait_for


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
