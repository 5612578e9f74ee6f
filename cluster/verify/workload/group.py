"""The consumer-group workload (``rafka verify --workload group``): the produce workload's
idempotent producer, and a consumer group whose members (confluent-kafka, subscribe, no
auto-commit) come and go while it consumes: every ``churn_s`` seconds one member joins, leaves
(close: it commits, then leaves the group) or is killed (it stops polling and never leaves: the
coordinator must notice through max.poll.interval.ms and hand its partitions on).

Each member records every record it is handed, its assignments and revocations (its rebalance
callbacks), and every commit it got an answer for: after each batch it commits, synchronously,
the next offset of every partition the batch touched. At the end the churn stops and the members
left consume until the group's commits reach the final high watermarks.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from cluster.verify.history import History, MemberEvent
from cluster.verify.workload.produce import Workload, rdkafka_conf

GROUP = "verify-group"
_MAX_POLL_S = 8  # max.poll.interval.ms: how long a killed member holds its partitions


class Member:
    """One member of the group, consuming in a thread of its own until it leaves or is killed."""

    def __init__(
        self, history: History, bootstrap: str, topic: str, name: str, position: dict[int, int]
    ) -> None:
        self.history, self.topic, self.name, self.position = history, topic, name, position
        self.conf = rdkafka_conf(
            bootstrap,
            **{
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": _MAX_POLL_S * 1000,
                "partition.assignment.strategy": "range",
            },
        )
        self._stop = threading.Event()
        self._kill = threading.Event()
        self._consumer: Consumer | None = None
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def _event(
        self,
        kind: str,
        partitions: tuple[int, ...] = (),
        offsets: tuple[tuple[int, int], ...] = (),
        detail: str = "",
    ) -> None:
        event = MemberEvent(GROUP, self.name, kind, time.time(), partitions, offsets, detail)
        self.history.event(event)

    def _on(self, kind: str) -> Callable[[Consumer, list[TopicPartition]], None]:
        def callback(_consumer: Consumer, tps: list[TopicPartition]) -> None:
            self._event(kind, tuple(sorted(tp.partition for tp in tps)))

        return callback

    def start(self) -> None:
        self._consumer = Consumer(self.conf)
        self._consumer.subscribe(
            [self.topic],
            on_assign=self._on("assigned"),
            on_revoke=self._on("revoked"),
            on_lost=self._on("lost"),
        )
        self._event("start")
        self._thread.start()

    def leave(self) -> None:
        """Stop consuming, commit, close (the member leaves the group)."""
        self._stop.set()
        self._thread.join(30)

    def kill(self) -> None:
        """Stop polling for good, without leaving: the coordinator has to find out itself."""
        self._event("killed")
        self._kill.set()
        self._thread.join(30)

    def close_killed(self, timeout_s: float = 10.0) -> None:
        """At the end of the run, let go of a killed member's client (its events are ignored).
        Its close may never return (librdkafka waits on a group it was thrown out of long
        ago): it runs in a thread of its own, given ``timeout_s``."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        closer = threading.Thread(target=consumer.close, name=f"close-{self.name}", daemon=True)
        closer.start()
        closer.join(timeout_s)
        if closer.is_alive():
            self.history.note(f"{self.name} (killed): its client did not close in {timeout_s}s")

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set() and not self._kill.is_set():
            batch: dict[int, int] = {}
            for m in consumer.consume(200, 0.2):
                if m.error() is not None:
                    continue
                p, o = m.partition(), m.offset()
                assert p is not None and o is not None
                self.history.read(self.name, p, o, m.key(), m.value())
                batch[p] = max(batch.get(p, 0), o + 1)
                self.position[p] = max(self.position.get(p, 0), o + 1)
            if batch and not self._kill.is_set():
                self._commit(consumer, batch)
        if self._kill.is_set():
            return  # no commit, no close: as if the process died
        consumer.close()  # revokes (the callback records it), then leaves the group
        self._consumer = None
        self._event("left")

    def _commit(self, consumer: Consumer, batch: dict[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in batch.items()]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self._event("commit-failed", tuple(batch), detail=str(e.args[0]))
            return
        self._event("commit", offsets=tuple(sorted(batch.items())))


class GroupWorkload(Workload):
    """An idempotent producer, a live reader, and the churning consumer group."""

    def setup(self) -> None:
        super().setup()
        self.members: list[Member] = []
        self.killed: list[Member] = []
        self._rng = random.Random(f"{self.config.seed}-group")
        self._n = 0
        self.position: dict[int, int] = {}  # the next offset the group has not been handed
        self._churn_stop = threading.Event()
        self._churn = threading.Thread(target=self._churn_loop, name="group-churn", daemon=True)

    def _join(self) -> None:
        self._n += 1
        c = self.config
        member = Member(
            self.history, self.cluster.bootstrap, c.topic, f"member-{self._n}", self.position
        )
        member.start()
        self.members.append(member)

    def start(self) -> None:
        super().start()
        for _ in range(self.config.group_members):
            self._join()
        self._churn.start()

    def _churn_loop(self) -> None:
        while not self._churn_stop.wait(self.config.churn_s):
            action = self._rng.choice(("join", "leave", "kill"))
            if action == "join" or len(self.members) < 2:
                self._join()
                continue
            member = self.members.pop(self._rng.randrange(len(self.members)))
            if action == "leave":
                member.leave()
            else:
                member.kill()
                self.killed.append(member)

    def catch_up(self, high: dict[int, int], timeout_s: float) -> bool:
        """The live reader, and the group (churn stopped first) handed everything below
        ``high``."""
        self._churn_stop.set()
        self._churn.join(60)
        deadline = time.monotonic() + timeout_s
        ok = super().catch_up(high, timeout_s)
        while not all(self.position.get(p, 0) >= h for p, h in high.items()):
            if time.monotonic() > deadline:
                self.history.note(f"group {GROUP}: handed up to {self.position}, not {high}")
                return False
            time.sleep(0.1)
        return ok

    def stop_consumers(self) -> None:
        super().stop_consumers()
        self._churn_stop.set()
        if self._churn.is_alive():
            self._churn.join(60)
        for m in self.members:
            m.leave()
        for m in self.killed:
            m.close_killed()
        self.members = []
