"""`python_driver.py confluent share-consume ...`: one member of a share group (KIP-932) with
confluent-kafka's ShareConsumer in explicit acknowledgement mode (README.md, "Share groups").
kafka-python and aiokafka have no share consumer (exit 3)."""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time

from python_driver import (
    confluent_error_name,
    confluent_security,
    error_name,
    event,
    fail,
    parse_ints,
    s,
)

SHARE_COMMANDS = ("share-consume",)
ACKS = ("accept", "release", "reject")


class Plan:
    """How each record is acknowledged: --release / --reject offsets, else --ack."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.default = a.ack
        self.release = parse_ints(a.release)
        self.reject = parse_ints(a.reject)

    def ack(self, offset: int | None) -> str:
        if offset in self.release:
            return "release"
        if offset in self.reject:
            return "reject"
        return self.default


class Stdin:
    """stdin of a share-consume: a "stop" line or its end stops the member; any other line
    ends a --hold."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
            self.lines.put(line.strip())
        self.stop.set()
        self.lines.put("")  # wakes a hold

    def hold(self) -> None:
        self.lines.get()


def share_consume(a: argparse.Namespace) -> None:
    """Subscribe, then poll, acknowledge every record of a poll as the plan says and commit
    them (--commit sync: commit_sync after each poll; async: commit_async; auto: they ride on
    the next poll), until stdin ends, --max-records records or --timeout."""
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    if a.commit not in ("auto", "sync", "async"):
        fail("share-consume: --commit takes auto, sync or async")
    types = {
        "accept": AcknowledgeType.ACCEPT,
        "release": AcknowledgeType.RELEASE,
        "reject": AcknowledgeType.REJECT,
    }
    plan = Plan(a)
    stdin = Stdin()
    conf = confluent_security() | {
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "share.acknowledgement.mode": "explicit",
    }
    consumer = ShareConsumer(conf)
    consumer.set_acknowledgement_commit_callback(acked)
    consumer.subscribe([a.topic])
    event("subscribed", group=a.group)
    records, hold = 0, a.hold == "true"
    deadline = time.monotonic() + a.timeout
    timed_out = False
    try:
        while not stdin.stop.is_set() and not (a.max_records and records >= a.max_records):
            if time.monotonic() > deadline:
                timed_out = True
                break
            batch = []
            for m in consumer.poll(0.2):
                err = m.error()
                if err is not None:
                    event("error", error=confluent_error_name(err), message=err.str(), fatal=False)
                    continue
                ack = plan.ack(m.offset())
                event(
                    "record",
                    key=s(m.key()),
                    partition=m.partition(),
                    offset=m.offset(),
                    delivery_count=m.delivery_count(),
                    ack=ack,
                )
                batch.append((m, ack))
            if not batch:
                continue
            records += len(batch)
            if hold:  # --hold true: the first records stay acquired until stdin says go
                event("hold", records=records)
                stdin.hold()
                hold = False
            for m, ack in batch:
                consumer.acknowledge(m, types[ack])
            if a.commit == "sync":
                committed(consumer.commit_sync(a.timeout))
            elif a.commit == "async":
                consumer.commit_async()
    except KafkaException as e:  # reported as an event, then as the contract's error line
        event("error", error=error_name(e), message=str(e), fatal=True)
        fail(f"share-consume: {e!r}", error_name(e))
    finally:
        consumer.close()  # commits what is still pending, leaves the group
        event("closed", records=records)
    if timed_out:
        fail(f"share-consume: still running after {a.timeout:g}s", "TIMEOUT")


def committed(results: dict) -> None:
    """commit_sync's answer: per partition, None or the error the broker gave."""
    if results:
        event(
            "commit",
            partitions={
                str(tp.partition): None if e is None else confluent_error_name(e.args[0])
                for tp, e in results.items()
            },
        )


def acked(offsets: dict, exc: Exception | None) -> None:
    """The acknowledgement commit callback: which offsets the broker took (error null) or
    refused."""
    error = None if exc is None else confluent_error_name(exc.args[0])
    for tp, offs in offsets.items():
        event("acked", partition=tp.partition, offsets=sorted(offs), error=error)


SHARE_CLIENTS = {"confluent": share_consume}
