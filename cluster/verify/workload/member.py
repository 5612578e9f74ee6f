"""One consumer-group member in a process of its own (``python -m cluster.verify.workload.member``),
spawned by the group workload (workload/group.py) so that killing it is a real ``kill -9``: no
close, no LeaveGroup, no last commit - the coordinator has to find out by itself.

The member subscribes (confluent-kafka, no auto-commit) with the group protocol it is given
(``classic``: JoinGroup/SyncGroup, range assignor; ``consumer``: KIP-848's
ConsumerGroupHeartbeat, the broker assigns) and writes its history as JSON lines on stdout, each
flushed before the member acts on it: every record it is handed (``read``), its assignments,
revocations and losses (its rebalance callbacks), every commit it got an answer for. After each
batch it commits, synchronously, the next offset of every partition the batch touched - only
once the batch's reads are out, so a commit is never recorded ahead of the reads it covers.
SIGTERM makes it leave: stop, close (revokes, commits nothing more), ``left``, exit 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

MAX_POLL_S = 8  # max.poll.interval.ms (classic); a killed member's partitions wait this long


def member_conf(bootstrap: str, group: str, protocol: str) -> dict[str, Any]:
    """The consumer's settings. KIP-848 moves the session timeout, heartbeat interval and
    assignor to the broker (group.consumer.*): the client may not set them."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": MAX_POLL_S * 1000,
    }
    if protocol == "classic":
        conf.update(
            {
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
                "partition.assignment.strategy": "range",
            }
        )
    return conf


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        self.topic = topic
        self.stop = threading.Event()
        self.consumer = Consumer(member_conf(bootstrap, group, protocol))

    def emit(self, kind: str, **fields: Any) -> None:
        sys.stdout.write(json.dumps({"k": kind, "t": time.time(), **fields}) + "\n")
        sys.stdout.flush()

    def _on(self, kind: str) -> Callable[[Consumer, list[TopicPartition]], None]:
        def callback(_consumer: Consumer, tps: list[TopicPartition]) -> None:
            self.emit(kind, partitions=sorted(tp.partition for tp in tps))

        return callback

    def run(self) -> None:
        c = self.consumer
        c.subscribe(
            [self.topic],
            on_assign=self._on("assigned"),
            on_revoke=self._on("revoked"),
            on_lost=self._on("lost"),
        )
        self.emit("start")
        while not self.stop.is_set():
            batch: dict[int, int] = {}
            for m in c.consume(200, 0.2):
                if m.error() is not None:
                    continue
                p, o = m.partition(), m.offset()
                key, value = m.key(), m.value()
                self.emit(
                    "read",
                    p=p,
                    o=o,
                    key=None if key is None else key.decode("latin-1"),
                    value=None if value is None else value.decode("latin-1"),
                )
                assert p is not None and o is not None
                batch[p] = max(batch.get(p, 0), o + 1)
            if batch:
                self._commit(batch)
        c.close()  # revokes (the callback records it), then leaves the group
        self.emit("left")

    def _commit(self, batch: dict[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in batch.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self.emit("commit-failed", partitions=sorted(batch), detail=str(e.args[0]))
            return
        self.emit("commit", offsets=sorted(batch.items()))


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--bootstrap", required=True)
    args.add_argument("--topic", required=True)
    args.add_argument("--group", required=True)
    args.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    a = args.parse_args()
    member = Member(a.bootstrap, a.topic, a.group, a.protocol)
    signal.signal(signal.SIGTERM, lambda *_: member.stop.set())
    member.run()


if __name__ == "__main__":
    main()
