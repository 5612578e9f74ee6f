"""Consumer-group members as background processes, for the group tests.

``Member`` starts a driver's ``group-consume`` (README.md, "Consumer groups") with its stdin
open, reads its JSON events as they come, and offers waits with deadlines on them (never
sleeps); ``tell("resume")`` resumes what ``--pause`` paused, ``stop()`` closes stdin (a clean
close: commit, leave the group) and ``kill()`` is kill -9. The functions below check what a set
of members did: who owns which partition, that no two owned one at once, that every produced
record was processed, that a paused partition delivered nothing until resumed.

Small direct helpers (produce, end offsets, committed offsets, describe) use confluent-kafka
in-process: they are the test's own view of the broker, not the client under test.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cluster.local import LocalCluster
from tests.integration.clients.drivers import DRIVERS, PYTHON_DRIVERS
from tests.integration.conftest import wait_for

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

T = TypeVar("T")

# The in-process librdkafka helpers log to this (nowhere), not to stderr: a test that kills a
# broker would otherwise print every refused connection.
_QUIET = logging.getLogger("group_member.rdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

# Every client with a group consumer; java-3.9.1 is the same driver on older jars.
GROUP_DRIVERS = [
    "confluent",
    "kafka-python",
    "aiokafka",
    "kafkajs",
    "java-4.3.0",
    "java-3.9.1",
    "franz-go",
    "sarama",
]

# Fast group timing for tests: a killed member is noticed after 6 s (the brokers' default
# group.min.session.timeout.ms), heartbeats every second.
SESSION_TIMEOUT_S = 6
FAST = ("--session-timeout", str(SESSION_TIMEOUT_S), "--heartbeat-interval", "1")


class MemberDied(AssertionError):
    pass


class Member:
    def __init__(
        self,
        driver: str,
        bootstrap: str,
        topic: str,
        group: str,
        *options: str,
        name: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.driver = driver
        self.name = name or driver
        self.argv = [
            *DRIVERS[driver],
            "group-consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--stop-on-eof",
            "true",
            *options,
        ]
        self._events: list[dict] = []
        self._cond = threading.Condition()
        # Lives as long as the member (read by describe()); closed in close().
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
        self.killed_at: int | None = None  # epoch ms of kill -9
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            env=os.environ | (env or {}),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                ev = json.loads(line)
                with self._cond:
                    self._events.append(ev)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    # -- what it printed -------------------------------------------------------------------

    @property
    def events(self) -> list[dict]:
        with self._cond:
            return list(self._events)

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]

    def records(self) -> list[dict]:
        return self.of("record")

    def offsets(self) -> dict[int, list[int]]:
        """partition -> offsets of its processed records, in processing order."""
        out: dict[int, list[int]] = {}
        for r in self.records():
            out.setdefault(r["partition"], []).append(r["offset"])
        return out

    def owned(self) -> set[int]:
        """Its partitions as of its last assignment event (empty before the first)."""
        last = [e for e in self.events if e["event"] in ("assigned", "revoked", "lost")]
        return set(last[-1]["owned"]) if last else set()

    def stderr(self) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def describe(self) -> str:
        """Its exit code, its last events but records (what it was assigned, committed...: a
        member stuck in a rebalance shows there, its client's log at WARN says nothing) and the
        end of its stderr."""
        others = [json.dumps(e) for e in self.events if e["event"] != "record"][-12:]
        records = len(self.records())
        return (
            f"{self.name} (rc={self.proc.poll()}, {records} records), events:\n  "
            + "\n  ".join(others or ["(none)"])
            + f"\nstderr:\n{self.stderr()[-3000:]}"
        )

    # -- waits -----------------------------------------------------------------------------

    def wait_for(self, pred: Callable[[list[dict]], T | None], timeout: float, what: str) -> T:
        """Waits until ``pred(events)`` is truthy (returns it), the deadline, or the process
        exits without it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = pred(list(self._events))
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.name}: no {what} within {timeout}s\n{self.describe()}"
                    )
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise MemberDied(f"{self.name} exited before {what}\n{self.describe()}")
                self._cond.wait(min(left, 0.2))

    def wait_event(self, kind: str, timeout: float, **match: object) -> dict:
        def pred(evs: list[dict]) -> dict | None:
            for e in evs:
                if e["event"] == kind and all(e.get(k) == v for k, v in match.items()):
                    return e
            return None

        return self.wait_for(pred, timeout, f"{kind} event {match or ''}")  # type: ignore[return-value]

    def wait_records(self, n: int, timeout: float) -> None:
        self.wait_for(
            lambda evs: sum(e["event"] == "record" for e in evs) >= n, timeout, f"{n} records"
        )

    # -- telling, stopping ------------------------------------------------------------------

    def tell(self, line: str) -> None:
        """A line on its stdin: ``resume`` resumes the partitions --pause paused."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _dump_stacks(self) -> None:
        """A Python driver that hangs prints its threads' stacks (faulthandler on SIGQUIT, into
        its stderr, which describe() shows) before it is killed: where it hung, in which call."""
        if self.driver not in PYTHON_DRIVERS:
            return
        self.proc.send_signal(signal.SIGQUIT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(2)

    def stop(self, timeout: float = 60) -> int:
        """Clean stop: stdin closes, the member commits, leaves the group and exits."""
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._dump_stacks()
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{self.name} did not stop within {timeout}s\n{self.describe()}"
            ) from None
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        """kill -9: no commit, no LeaveGroup; the coordinator notices at session timeout."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.killed_at = int(time.time() * 1000)
        self.proc.wait()
        self._reader.join(5)

    def close(self) -> None:
        """Test teardown: whatever state it is in, make sure the process is gone."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        self._stderr.close()


# -- group-level checks ------------------------------------------------------------------------


def owners(members: Iterable[Member]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for m in members:
        for p in m.owned():
            out.setdefault(p, []).append(m.name)
    return out


def wait_exclusive(
    members: list[Member], partitions: int, timeout: float, balanced: bool = False
) -> dict[str, set[int]]:
    """Waits until every partition is owned by exactly one of the (live) members, and every
    member owns one at least (when there are enough partitions: all of them joined); with
    ``balanced``, until their counts differ by one at most (incremental protocols get there in
    steps). Returns each member's partitions."""

    def check() -> dict[str, set[int]] | None:
        for m in members:
            if not m.alive():
                raise MemberDied(f"{m.name} exited\n{m.describe()}")
        own = owners(members)
        if sorted(own) != list(range(partitions)) or any(len(v) != 1 for v in own.values()):
            return None
        if len(members) <= partitions and not all(m.owned() for m in members):
            return None
        counts = [len(m.owned()) for m in members]
        if balanced and max(counts) - min(counts) > 1:
            return None
        return {m.name: m.owned() for m in members}

    try:
        return wait_for(check, timeout, "exclusive assignment")
    except AssertionError as e:
        raise AssertionError(
            f"{e}: owners now {owners(members)}\n" + "\n".join(m.describe() for m in members)
        ) from None


def ownership_intervals(m: Member) -> dict[int, list[tuple[int, int]]]:
    """partition -> [(from, to)] epoch-ms intervals during which the member owned it, from
    its assignment events; open ones end when it closed or was killed."""
    end_default = m.killed_at or int(time.time() * 1000) + 10**9
    intervals: dict[int, list[tuple[int, int]]] = {}
    since: dict[int, int] = {}
    for e in m.events:
        if e["event"] == "closed":
            end_default = e["t"]
        if e["event"] not in ("assigned", "revoked", "lost"):
            continue
        now = set(e["owned"])
        for p in now - set(since):
            since[p] = e["t"]
        for p in set(since) - now:
            intervals.setdefault(p, []).append((since.pop(p), e["t"]))
    for p, t in since.items():
        intervals.setdefault(p, []).append((t, end_default))
    return intervals


def overlaps(members: list[Member]) -> list[str]:
    """Partitions that two members owned at the same time (by their own events' clocks)."""
    errs = []
    per = [(m.name, ownership_intervals(m)) for m in members]
    for i, (a, ia) in enumerate(per):
        for b, ib in per[i + 1 :]:
            for p in set(ia) & set(ib):
                for s1, e1 in ia[p]:
                    for s2, e2 in ib[p]:
                        if s1 < e2 and s2 < e1:
                            errs.append(f"partition {p}: {a} [{s1},{e1}) and {b} [{s2},{e2})")
    return errs


def processed_keys(members: Iterable[Member]) -> set[str]:
    return {r["key"] for m in members for r in m.records()}


def wait_processed(members: list[Member], keys: Iterable[str], timeout: float) -> None:
    """Waits until the members have processed every one of ``keys`` (at least once)."""
    want = set(keys)
    try:
        wait_for(lambda: want <= processed_keys(members), timeout, "every record processed")
    except AssertionError as e:
        missing = sorted(want - processed_keys(members))
        raise AssertionError(
            f"{e}: {len(missing)} missing, e.g. {missing[:5]}\n"
            + "\n".join(m.describe() for m in members)
        ) from None


def assert_read_once(m: Member, ends: dict[int, int]) -> None:
    """Every partition's records were processed once each, in order, from 0 to its end."""
    got = m.offsets()
    for p, end in ends.items():
        assert got.get(p, []) == list(range(end)), (p, got.get(p))


def check_paused(m: Member, partition: int, end: int) -> tuple[dict, dict]:
    """The member paused ``partition`` alone and resumed it later: none of its records was
    processed before the resume, all of them after it (0 .. end - 1, once, in order). Returns
    the ``paused`` and ``resumed`` events."""
    evs = m.events
    kinds = [e["event"] for e in evs]
    assert "paused" in kinds, kinds
    assert "resumed" in kinds, kinds
    paused, resumed = evs[kinds.index("paused")], evs[kinds.index("resumed")]
    assert paused["partitions"] == [partition] == resumed["partitions"], (paused, resumed)
    early = [e for e in evs[: kinds.index("resumed")] if e["event"] == "record"]
    assert all(e["partition"] != partition for e in early), early
    assert m.offsets().get(partition) == list(range(end)), m.offsets().get(partition)
    return paused, resumed


# -- the test's own view of the broker (confluent-kafka in-process) -----------------------------


def names(prefix: str) -> tuple[str, str]:
    """A fresh topic name and a fresh group name."""
    tag = uuid.uuid4().hex[:6]
    return f"{prefix}-{tag}", f"g-{prefix}-{tag}"


def keys(start: int, n: int) -> list[str]:
    return [f"k{i}" for i in range(start, start + n)]


def new_topic(
    bootstrap: str, prefix: str, partitions: int, count: int, replication: int
) -> tuple[str, str, dict[str, tuple[int, int]]]:
    """A fresh topic holding ``count`` records ``keys(0, count)``, a fresh group name, and
    where each record went (key -> (partition, offset))."""
    topic, group = names(prefix)
    create_topic(bootstrap, topic, partitions, replication)
    return topic, group, produce(bootstrap, topic, keys(0, count)) if count else {}


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = -1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = quiet_admin(bootstrap)
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(60)
    wait_for(
        lambda: (
            len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == partitions
            and all(
                pm.leader >= 0
                for pm in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
            )
        ),
        60,
        f"leaders for {topic}",
    )


CONSUMER_GROUP_HEARTBEAT = 68  # KIP-848's API key


def broker_has_api(bootstrap: str, api_key: int) -> bool:
    """Whether the first bootstrap broker lists ``api_key`` in its ApiVersions answer."""
    from tests.integration.kafka_wire import WireClient

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with WireClient(int(port), host) as c:
        got = c.call(18, 3, client_software_name="rafka-tests", client_software_version="1")
    return any(k.api_key == api_key for k in got.api_keys)


def quiet_admin(bootstrap: str) -> AdminClient:
    """An admin client that logs nowhere (see _QUIET)."""
    from confluent_kafka.admin import AdminClient

    # The stub types a config value as str | int | float | bool; librdkafka also takes a logger.
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _QUIET}
    return AdminClient(conf)


def topic_replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """partition -> replica node ids, from Metadata."""
    admin = quiet_admin(bootstrap)
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return {p: list(pm.replicas) for p, pm in md.partitions.items()}


def produce(bootstrap: str, topic: str, keys: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Keyed records (value = key), acks=all; returns key -> (partition, offset)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "logger": _QUIET})
    out: dict[str, tuple[int, int]] = {}
    errors: list[str] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            out[msg.key().decode()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for k in keys:
        p.produce(topic, k.encode(), k.encode(), on_delivery=report)
        p.poll(0)
    left = p.flush(60)
    assert not left, f"produce failed: {left} left, {errors[:3]}"
    assert not errors, f"produce failed: {left} left, {errors[:3]}"
    return out


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "end-offsets-probe", "logger": _QUIET}
    )
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        c.close()


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """Committed offset per partition (-1: none), from OffsetFetch."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = quiet_admin(bootstrap)
    parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in parts])]
    got = admin.list_consumer_group_offsets(req, request_timeout=20)[group].result(30)
    return {tp.partition: max(tp.offset, -1) for tp in got.topic_partitions}


def describe(bootstrap: str, group: str):  # -> confluent_kafka.admin.ConsumerGroupDescription
    admin = quiet_admin(bootstrap)
    return admin.describe_consumer_groups([group], request_timeout=20)[group].result(30)


def wait_committed(
    bootstrap: str,
    topic: str,
    group: str,
    want: dict[int, int],
    timeout: float,
    members: Iterable[Member] = (),
) -> dict[int, int]:
    """Waits until the group's committed offsets reach ``want`` (e.g. the end offsets)."""
    last: dict[int, int] = {}

    def check() -> bool:
        nonlocal last
        last = committed(bootstrap, topic, group)
        return all(last.get(p, -1) >= o for p, o in want.items())

    try:
        wait_for(check, timeout, "committed offsets", interval=0.3)
    except AssertionError:
        raise AssertionError(
            f"committed {last}, want {want}\n" + "\n".join(m.describe() for m in members)
        ) from None
    return last


def group_overrides() -> dict[str, str]:
    """Broker settings for quick group tests, as far as this broker has them (Kafka's names):
    no initial rebalance delay, and KIP-848 session/heartbeat as short as the classic ones."""
    from dataplane.config import BrokerConfig

    wanted = {
        "group_initial_rebalance_delay_ms": 0,
        "group_consumer_session_timeout_ms": SESSION_TIMEOUT_S * 1000,
        "group_consumer_min_session_timeout_ms": SESSION_TIMEOUT_S * 1000,
        "group_consumer_heartbeat_interval_ms": 1000,
        "group_consumer_min_heartbeat_interval_ms": 1000,
    }
    return {k: str(v) for k, v in wanted.items() if k in BrokerConfig.model_fields}


@dataclass
class External:
    """A broker started elsewhere: with $RAFKA_GROUPS_BOOTSTRAP set, the group tests run
    against it (to develop the client side against another Kafka); those that stop brokers
    skip."""

    bootstrap: str


GroupCluster = LocalCluster | External


def coordinator_log(cluster: GroupCluster, group: str, lines: int = 40) -> str:
    """The brokers' last log lines about `group`, in time order (a Rafka cluster's only): what
    the coordinators did (joins, rebalances, expiries, leaves) while a member misbehaved."""
    if isinstance(cluster, External):
        return ""
    found = sorted(
        f"{line} [{path.stem}]"  # lines start with their time
        for path in (cluster.data_dir / "logs").glob("broker-*.log")
        for line in path.read_text(errors="replace").splitlines()
        if group in line
    )
    return f"coordinator log of {group} (last {lines} lines):\n" + "\n".join(found[-lines:])


@contextlib.contextmanager
def group_cluster(tmp: Path, brokers: int = 3, metas: int = 3) -> Iterator[GroupCluster]:
    """A Rafka cluster with group_overrides() (or External, see above)."""
    if os.environ.get("RAFKA_GROUPS_BOOTSTRAP"):
        yield External(os.environ["RAFKA_GROUPS_BOOTSTRAP"])
        return
    from tests.integration.conftest import start_cluster

    c = start_cluster(tmp, brokers, metas, internal_tls=False, **group_overrides())
    try:
        yield c
    finally:
        c.stop()
