"""Share-group members (KIP-932) for the integration tests: `share-consume` runs of the client
drivers (confluent-kafka's ShareConsumer, Java's KafkaShareConsumer) in the background, with
what each delivered and which acknowledgements the broker confirmed; group configs set through
each client's own admin API; the group's members seen through ShareGroupDescribe."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import admin as rafka_admin
from cluster.polling import wait_for
from tests.integration.clients import drivers

CLIENTS = ["confluent", "java-4.3.0"]  # the clients with a KIP-932 share consumer
# Acknowledgement failures whose outcome is unknown: the request may have been applied before
# the connection broke. librdkafka reports its local errors; Java's share consumer turns a
# broken connection into UNKNOWN_SERVER_ERROR (Errors.forException of a DisconnectException),
# which the driver prints as UnknownServerException.
INDETERMINATE = {
    "_TRANSPORT",
    "_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "REQUEST_TIMED_OUT",
    "UnknownServerException",
}
SHARE_GROUP_DESCRIBE = 77


class Member:
    """One `share-consume` run (README.md in clients/, "Share groups"); stopped by closing its
    stdin, or killed with -9."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, *options: str):
        self.client = client
        self.run = drivers.Running(
            client,
            "share-consume",
            *("--bootstrap", bootstrap, "--topic", topic, "--group", group),
            *("--commit", "sync", "--timeout", "300"),
            *options,
        )

    def events(self, kind: str) -> list[dict]:
        return [x for x in self.run.lines if isinstance(x, dict) and x.get("event") == kind]

    def records(self) -> list[dict]:
        """Every delivery, in order: key, partition, offset, delivery_count, ack, t."""
        return self.events("record")

    def confirmed(self) -> set[int]:
        """Offsets whose acknowledgement the broker confirmed (the commit callback, no error)."""
        return {o for x in self.events("acked") if x["error"] is None for o in x["offsets"]}

    def indeterminate(self) -> set[int]:
        """Offsets whose acknowledgement got an answer of unknown outcome (INDETERMINATE)."""
        return {
            o for x in self.events("acked") if x["error"] in INDETERMINATE for o in x["offsets"]
        }

    def confirmed_at(self) -> dict[int, int]:
        """offset -> time (epoch ms) its acknowledgement was first confirmed."""
        out: dict[int, int] = {}
        for x in self.events("acked"):
            if x["error"] is None:
                for o in x["offsets"]:
                    out.setdefault(o, x["t"])
        return out

    def wait(self, kind: str, timeout: float = 60) -> dict:
        return self.run.wait_line(lambda x: x.get("event") == kind, timeout, f"{kind} event")

    def stop(self, timeout: float = 60) -> drivers.Result:
        """Close stdin: the member acknowledges what it holds, closes and exits."""
        result = self.run.finish(timeout)
        assert result.returncode == 0, (result.lines[-3:], result.stderr[-3000:])
        return result

    def kill(self) -> None:
        self.run.kill()

    def describe(self) -> str:
        """For failure messages: the last lines and stderr."""
        return f"{self.client}: lines {self.run.lines[-3:]}; stderr {self.run.stderr()[-2000:]}"


@contextmanager
def running(*members: Member) -> Iterator[None]:
    """Stops the members (checking they end well) when the block ends, or kills them when it
    fails (its failure is the one to see)."""
    try:
        yield
    except BaseException:
        for m in members:
            m.kill()
        raise
    for m in members:
        m.stop()


def confirmed(members: Iterable[Member]) -> set[int]:
    return set().union(*(m.confirmed() for m in members))


def unsettled(members: list[Member], offsets: set[int], excuse_indeterminate: bool) -> set[int]:
    """The offsets no member has a confirmed acknowledgement of (nor, when excused, one of
    unknown outcome)."""
    out = offsets - confirmed(members)
    if excuse_indeterminate:
        out -= set().union(*(m.indeterminate() for m in members))
    return out


def wait_confirmed(
    members: list[Member],
    offsets: set[int],
    timeout: float,
    what: str,
    excuse_indeterminate: bool = False,
) -> None:
    """Until the members together have confirmed acknowledgements of every offset given (with
    `excuse_indeterminate`: or had an answer of unknown outcome)."""

    def done() -> bool:
        for m in members:
            if m.run.proc.poll() is not None and m.run.proc.returncode != 0:
                raise AssertionError(f"{what}: a member failed: {m.describe()}")
        return not unsettled(members, offsets, excuse_indeterminate)

    try:
        wait_for(done, timeout, what, interval=0.2)
    except AssertionError as e:
        missing = sorted(unsettled(members, offsets, excuse_indeterminate))
        raise AssertionError(
            f"{e}; {len(missing)} offsets unconfirmed, first {missing[:10]}; their history: "
            f"{history(members, set(missing[:10]))}; " + " | ".join(m.describe() for m in members)
        ) from None


def history(members: list[Member], offsets: set[int]) -> list[tuple[int, dict]]:
    """Every delivery and acknowledgement answer of these offsets, by member, in time order."""
    out = [
        (i, x)
        for i, m in enumerate(members)
        for x in m.run.lines
        if isinstance(x, dict)
        and (x.get("offset") in offsets or offsets & set(x.get("offsets", ())))
    ]
    return sorted(out, key=lambda ix: ix[1]["t"])


def duplicates(offsets: Iterable[int]) -> dict[int, int]:
    return {o: n for o, n in Counter(offsets).items() if n > 1}


def alter_group(client: str, bootstrap: str, group: str, **configs: object) -> None:
    """IncrementalAlterConfigs (SET) on the GROUP resource through the client's admin API;
    config names given with '_' for '.' (share_auto_offset_reset=...)."""
    sets = [a for k, v in configs.items() for a in ("--set", f"{k.replace('_', '.')}={v}")]
    r = drivers.run_driver(
        client, "admin", "alter-configs", "--bootstrap", bootstrap, "--group", group, *sets
    )
    assert r.returncode == 0, (
        r.lines,
        r.stderr[-3000:],
    )
    assert r.lines == [{"resource": "group", "name": group, "error": None}], (
        r.lines,
        r.stderr[-3000:],
    )


def create_topic(bootstrap: str, topic: str, partitions: int = 1, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(60)

    def led() -> bool:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        return (
            md is not None
            and md.error is None
            and all(p.leader >= 0 for p in md.partitions.values())
        )

    wait_for(led, 60, f"leaders of {topic}")


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Records key-<i> (i = first .. first+count-1), small values, to partition 0, acks=all,
    in batches of at most 100 records: a share-partition hands out whole log batches (Kafka's
    batch-optimized acquisition), so smaller batches let several members share the work."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.num.messages": 100,
            "enable.idempotence": True,
        }
    )
    failed: list[object] = []
    for i in range(first, first + count):
        p.produce(
            topic,
            key=f"key-{i}",
            value=f"v{i}",
            partition=0,
            on_delivery=lambda err, _m: failed.append(err) if err else None,
        )
        p.poll(0)
    assert p.flush(60) == 0, failed[:3]
    assert not failed, failed[:3]


def assigned_members(bootstrap: str, group: str) -> int:
    """How many members of the share group have partitions assigned (ShareGroupDescribe at the
    group's coordinator; 0 while the group is unknown)."""
    brokers = rafka_admin.Brokers(bootstrap)
    try:
        _node, host, port = rafka_admin.find_coordinator(brokers, group)
        with brokers.at(host, port) as c:
            r = c.call(
                SHARE_GROUP_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
            )
    except (rafka_admin.AdminError, OSError):
        return 0
    (g,) = r.groups
    if g.error_code:
        return 0
    return sum(1 for m in g.members if m.assignment.topic_partitions)
