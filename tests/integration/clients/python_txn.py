"""`python_driver.py <confluent|kafka-python> txn-produce|txn-copy|txn-fence ...`: the
transactions commands of the driver contract (README.md, "Transactions"), each written once
against two small adapters with one implementation per client."""

from __future__ import annotations

import argparse
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from python_driver import (
    confluent_security,
    error_name,
    event,
    fail,
    python_settings,
    record,
    s,
)
from python_groups import kafka_python_pending_join_fix

# --------------------------------------------------------------------------- transactions
#
# txn-produce, txn-copy and txn-fence (README.md, "Transactions"). Each command is written once
# against two small adapters, a transactional producer and a group reader, with one
# implementation per client (confluent-kafka, kafka-python); aiokafka is not covered.

TXN_COMMANDS = ("txn-produce", "txn-copy", "txn-fence")


Polled = list[tuple[int, int, bytes | None, bytes | None]]  # (partition, offset, key, value)


class TxnProducer(ABC):
    """The transactional producer calls the commands make, in the client's terms."""

    @abstractmethod
    def __init__(self, a: argparse.Namespace, transactional_id: str) -> None: ...
    @abstractmethod
    def init(self) -> None: ...
    @abstractmethod
    def begin(self) -> None: ...
    @abstractmethod
    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list, ts: int | None
    ) -> None: ...
    @abstractmethod
    def flush(self) -> None:
        """Waits for every record sent and raises the first delivery error."""

    @abstractmethod
    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object) -> None:
        """sendOffsetsToTransaction of {partition: next offset}."""

    @abstractmethod
    def commit(self) -> None: ...
    @abstractmethod
    def abort(self) -> None: ...
    @abstractmethod
    def close(self) -> None: ...


class GroupReader(ABC):
    """The read_committed group consumer of txn-copy (subscribed to --topic, group --group)."""

    @abstractmethod
    def __init__(self, a: argparse.Namespace) -> None: ...
    @abstractmethod
    def poll(self, max_records: int, timeout: float) -> Polled:
        """The records of one poll, at most max_records."""

    @abstractmethod
    def seek(self, partition: int, offset: int) -> None: ...
    @abstractmethod
    def group_metadata(self) -> object: ...
    @abstractmethod
    def close(self) -> None: ...


class ConfluentTxnProducer(TxnProducer):
    def __init__(self, a: argparse.Namespace, transactional_id: str) -> None:
        from confluent_kafka import KafkaException, Producer, TopicPartition

        self.timeout = a.timeout
        self.topic_partition, self.exception = TopicPartition, KafkaException
        conf = {"bootstrap.servers": a.bootstrap} | confluent_security()
        self.p = Producer(conf | {"transactional.id": transactional_id})
        self.errors: list = []

    def _report(self, err: object, _msg: object) -> None:
        if err is not None:
            self.errors.append(err)

    def init(self) -> None:
        self.p.init_transactions(self.timeout)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list, ts: int | None
    ) -> None:
        # timestamp 0: librdkafka stamps the record itself.
        self.p.produce(
            topic, value, key, headers=headers, on_delivery=self._report, timestamp=ts or 0
        )
        self.p.poll(0)

    def flush(self) -> None:
        try:
            left = self.p.flush(self.timeout)
        except SystemError as e:
            # A fatal error (e.g. _FENCED) raised while delivery callbacks still run comes out
            # of confluent-kafka as a SystemError caused by the KafkaException: raise that.
            if isinstance(e.__cause__, self.exception):
                raise e.__cause__ from None
            raise
        if self.errors:
            err, self.errors = self.errors[0], []
            raise self.exception(err)
        if left:
            raise TimeoutError(f"{left} records not acknowledged in {self.timeout} s")

    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object) -> None:
        tps = [self.topic_partition(topic, p, o) for p, o in offsets.items()]
        self.p.send_offsets_to_transaction(tps, group_metadata, self.timeout)

    def commit(self) -> None:
        self.p.commit_transaction(self.timeout)

    def abort(self) -> None:
        self.p.abort_transaction(self.timeout)

    def close(self) -> None:
        self.p.flush(0)


class ConfluentGroupReader(GroupReader):
    def __init__(self, a: argparse.Namespace) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        self.topic, self.tp, self.exception = a.topic, TopicPartition, KafkaException
        conf = {"bootstrap.servers": a.bootstrap} | confluent_security()
        self.c = Consumer(
            conf
            | {
                "group.id": a.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.c.subscribe([a.topic])

    def poll(self, max_records: int, timeout: float) -> Polled:
        out: Polled = []
        for m in self.c.consume(max_records, timeout):
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise self.exception(err)
                print(f"python_driver: consume: {err}", file=sys.stderr)
                continue
            out.append((m.partition() or 0, m.offset() or 0, m.key(), m.value()))
        return out

    def seek(self, partition: int, offset: int) -> None:
        self.c.seek(self.tp(self.topic, partition, offset))

    def group_metadata(self) -> object:
        return self.c.consumer_group_metadata()

    def close(self) -> None:
        self.c.close()


class KafkaPythonTxnProducer(TxnProducer):
    def __init__(self, a: argparse.Namespace, transactional_id: str) -> None:
        from kafka import KafkaProducer, OffsetAndMetadata, TopicPartition

        self.timeout = a.timeout
        self.oam, self.tp = OffsetAndMetadata, TopicPartition
        self.p = KafkaProducer(
            **python_settings(a, "kafka-python"),
            transactional_id=transactional_id,
            enable_idempotence=True,
            acks="all",
        )
        self.futures: list = []

    def init(self) -> None:
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list, ts: int | None
    ) -> None:
        self.futures.append(self.p.send(topic, value, key, headers=headers, timestamp_ms=ts))

    def flush(self) -> None:
        self.p.flush(self.timeout)
        futures, self.futures = self.futures, []
        for f in futures:
            f.get(self.timeout)

    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object) -> None:
        self.p.send_offsets_to_transaction(
            {self.tp(topic, p): self.oam(o, "", -1) for p, o in offsets.items()}, group_metadata
        )

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()

    def close(self) -> None:
        self.p.close(timeout=5)


class KafkaPythonGroupReader(GroupReader):
    def __init__(self, a: argparse.Namespace) -> None:
        from kafka import KafkaConsumer, TopicPartition

        kafka_python_pending_join_fix()
        self.topic, self.tp = a.topic, TopicPartition
        self.c = KafkaConsumer(
            **python_settings(a, "kafka-python"),
            group_id=a.group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.c.subscribe([a.topic])

    def poll(self, max_records: int, timeout: float) -> Polled:
        batches = self.c.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        return [(m.partition, m.offset, m.key, m.value) for ms in batches.values() for m in ms]

    def seek(self, partition: int, offset: int) -> None:
        self.c.seek(self.tp(self.topic, partition), offset)

    def group_metadata(self) -> object:
        return self.c.group_metadata()

    def close(self) -> None:
        self.c.close(autocommit=False)


TXN_CLIENTS: dict[str, tuple[type[TxnProducer], type[GroupReader]]] = {
    "confluent": (ConfluentTxnProducer, ConfluentGroupReader),
    "kafka-python": (KafkaPythonTxnProducer, KafkaPythonGroupReader),
}


def txn_end(a: argparse.Namespace, k: int) -> str:
    """How transaction k ends: item k mod len of --end ("commit,abort": alternate)."""
    ends = a.end.split(",")
    return ends[k % len(ends)]


class Hold:
    """--hold true: a transaction waits for a line on stdin before it ends; stdin's end
    releases this and every later hold."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.on = a.hold == "true"

    def wait(self, txn: int) -> None:
        if self.on:
            event("hold", txn=txn)
            self.on = bool(sys.stdin.readline())


def txn_produce(a: argparse.Namespace, producer: type[TxnProducer], _: object) -> None:
    p = producer(a, a.transactional_id)
    hold = Hold(a)
    try:
        p.init()
        for k in range(a.batches):
            ids = range(k * a.count // a.batches, (k + 1) * a.count // a.batches)
            p.begin()
            for i in ids:
                r = record(i, a.start_ts)
                p.send(a.topic, r.key, r.value, r.headers, r.timestamp)
            p.flush()
            hold.wait(k)
            end = txn_end(a, k)
            p.commit() if end == "commit" else p.abort()
            event(end, txn=k, first=ids.start, count=len(ids))
    finally:
        p.close()


def txn_copy(a: argparse.Namespace, producer: type[TxnProducer], reader: type[GroupReader]) -> None:
    p = producer(a, a.transactional_id)
    r = reader(a)
    hold = Hold(a)
    committed = aborted = txn = 0
    last = time.monotonic()
    deadline = last + a.timeout
    timed_out = False
    try:
        p.init()
        while not (a.count and committed >= a.count) and not (
            a.max_batches and txn >= a.max_batches
        ):
            now = time.monotonic()
            if a.idle and now - last >= a.idle:
                break
            if now >= deadline:
                timed_out = True
                break
            recs = r.poll(a.batch, min(0.5, deadline - now))
            if not recs:
                continue
            last = time.monotonic()
            first: dict[int, int] = {}
            nxt: dict[int, int] = {}
            p.begin()
            for part, off, key, value in recs:
                first.setdefault(part, off)
                nxt[part] = off + 1
                p.send(a.output, key, value, [("src", f"{part}:{off}".encode())], None)
            p.flush()
            p.send_offsets(a.topic, nxt, r.group_metadata())
            hold.wait(txn)
            end = txn_end(a, txn)
            if end == "commit":
                p.commit()
                committed += len(recs)
            else:
                p.abort()
                aborted += len(recs)
                for part, off in first.items():  # read them again in a later transaction
                    r.seek(part, off)
            offsets = {str(k): v for k, v in sorted(nxt.items())}
            event(end, txn=txn, records=len(recs), offsets=offsets, keys=[s(x[2]) for x in recs])
            txn += 1
    finally:
        r.close()
        p.close()
    event("closed", committed=committed, aborted=aborted)
    if timed_out:
        fail(f"txn-copy: {committed} of {a.count} records committed in {a.timeout} s", "TIMEOUT")


def txn_fence(a: argparse.Namespace, producer: type[TxnProducer], _: object) -> None:
    def send(p: TxnProducer, i: int) -> None:
        r = record(i, a.start_ts)
        p.send(a.topic, r.key, r.value, r.headers, r.timestamp)
        p.flush()

    zombie = producer(a, a.transactional_id)
    zombie.init()
    zombie.begin()
    event("begin", producer="A")
    send(zombie, 0)
    event("sent", producer="A", key="key-0")
    b = producer(a, a.transactional_id)
    b.init()  # bumps the epoch: A is fenced and its open transaction aborted
    event("init", producer="B")
    b.begin()
    send(b, 1)
    b.commit()
    event("commit", producer="B", key="key-1")
    b.close()
    stage = "send"
    try:
        send(zombie, 2)
        stage = "commit"
        zombie.commit()
    except Exception as e:
        event("fenced", producer="A", stage=stage, error=error_name(e))
        return
    finally:
        zombie.close()
    event("not-fenced", producer="A")
    fail("txn-fence: the first producer committed after the second one initialized", "NOT_FENCED")


TXN_RUNNERS: dict[
    str, Callable[[argparse.Namespace, type[TxnProducer], type[GroupReader]], None]
] = {
    "txn-produce": txn_produce,
    "txn-copy": txn_copy,
    "txn-fence": txn_fence,
}
