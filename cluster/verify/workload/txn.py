"""The transactional workload (``rafka verify --workload txn``): transactional producers
(confluent-kafka, acks=all, idempotent by construction) each writing transactions of 2-4 records
to distinct partitions of the topic, one in ``abort_ratio`` of them aborted on purpose, and two
live readers of every partition: ``live`` (read_uncommitted) and ``live-rc`` (read_committed).

Every transaction is recorded (`History.begin` / `end`: what it wrote, what was asked, what the
client was told) and every record as an attempt of its transaction. An outcome is COMMITTED or
ABORTED only when the client said so for the request the worker made; any error on the way to a
commit leaves it indeterminate (the checker then wants it all or nothing). After a fatal error
(fenced, or the producer's state lost) the worker starts a new producer with the same
transactional.id, whose InitProducerId aborts whatever the old one left open.
"""

from __future__ import annotations

import random
import time

from confluent_kafka import KafkaError, KafkaException, Producer

from cluster.verify.history import ABORTED, COMMITTED, INFO, History, ProducerInfo, Txn
from cluster.verify.workload.produce import LiveConsumer, PyProducer, Workload, ck_version

READ_COMMITTED = "live-rc"
TIMEOUT_S = 10.0  # each transactional call; a fault may stall the coordinator longer


class TxnProducer(PyProducer):
    """A transactional producer thread: one transaction after another until stopped, paced so
    that it writes at most ``rate`` records a second."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        name: str,
        *,
        partitions: int,
        rate: float,
        abort_ratio: float,
        seed: int,
        transaction_timeout_s: float = 15.0,
    ) -> None:
        super().__init__(
            history,
            bootstrap,
            topic,
            name,
            idempotent=True,
            rate=rate,
            message_timeout_s=transaction_timeout_s,  # librdkafka: at most the transaction's
            conf={
                "transactional.id": f"verify-{name}",
                "transaction.timeout.ms": int(transaction_timeout_s * 1000),
            },
        )
        history.add_producer(
            ProducerInfo(name, f"confluent-kafka {ck_version()[0]}", True, "all", "transactional")
        )
        self.partitions, self.abort_ratio = partitions, abort_ratio
        self._rng = random.Random(f"{seed}-{name}")
        self._count = 0
        self._seq = 0

    def start(self) -> None:
        self._thread.start()  # the producer is made (and its id initialised) in the thread

    def stop(self, drain_s: float = 30.0) -> None:
        """Stop after the transaction in progress (whose calls time out by themselves)."""
        self._stop.set()
        if self._thread.is_alive() or self._producer is not None:
            self._thread.join(drain_s + 3 * TIMEOUT_S)
        if self._thread.is_alive():  # its producer is its own until it ends (then it closes it)
            self.history.note(f"{self.name}: still in a transaction {drain_s + 30:.0f}s after stop")
            return
        self._close(drain=True)

    def _close(self, drain: bool = False) -> None:
        """Drop the producer: what it still holds is purged. ``drain``: the delivery reports of
        the purged records are served (a normal stop). After a failure they are not: a
        producer in a fatal state raises from flush, in the middle of serving them; what they
        would have said stays unanswered, i.e. indeterminate."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        producer.purge()
        if drain:
            try:
                producer.flush(5)
            except KafkaException as e:
                self.errors[f"close: {e.args[0].name()}"] += 1

    def _init(self) -> bool:
        """A fresh producer with this transactional.id, initialised (fencing any earlier one);
        False when stopped first."""
        self._close()
        while not self._stop.is_set():
            producer = Producer(self.conf)
            try:
                producer.init_transactions(TIMEOUT_S)
            except KafkaException as e:
                self.errors[f"init: {e.args[0].name()}"] += 1
                producer.purge()
                time.sleep(0.5)
                continue
            self._producer = producer
            return True
        return False

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._producer is None and not self._init():
                return
            started = time.monotonic()
            written = self._transaction()
            left = written / self.rate - (time.monotonic() - started)
            if left > 0:
                self._stop.wait(left)
        self._close(drain=True)

    def _transaction(self) -> int:
        """One transaction, recorded; returns how many records it wrote."""
        producer = self._producer
        assert producer is not None
        self._count += 1
        txn = self.history.begin(f"{self.name}#{self._count}", self.name)
        want = ABORTED if self._rng.random() < self.abort_ratio else COMMITTED
        parts = self._rng.sample(
            range(self.partitions), min(self.partitions, self._rng.randint(2, 4))
        )
        try:
            producer.begin_transaction()
            for p in parts:
                attempt = self.history.send(self.name, self._seq, txn=txn.id)
                self._seq += 1
                txn.writes.append(attempt.value.decode("latin-1"))
                producer.produce(
                    self.topic,
                    value=attempt.value,
                    key=attempt.key,
                    partition=p,
                    on_delivery=self._on_delivery,
                )
            txn.intent, txn.t_commit = want, time.time()
            if want == COMMITTED:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.flush(TIMEOUT_S)  # the aborted records are in the log, then aborted
                producer.abort_transaction(TIMEOUT_S)
            self.history.end(txn, want)
        except (KafkaException, BufferError) as e:
            self._failed(txn, e)
        return len(txn.writes)

    def _failed(self, txn: Txn, e: Exception) -> None:
        """A transactional call failed: the outcome is unknown unless an abort is asked and
        answered before anything was asked to commit; a fatal error means a new producer."""
        assert self._producer is not None
        err = e.args[0] if isinstance(e, KafkaException) else None
        name = err.name() if isinstance(err, KafkaError) else type(e).__name__
        self.errors[name] += 1
        asked_commit = txn.t_commit is not None and txn.intent == COMMITTED
        if isinstance(err, KafkaError) and err.fatal():
            self.history.end(txn, INFO if asked_commit else ABORTED, f"fatal {name}")
            self._close()  # the next transaction starts a new producer
            return
        if not asked_commit:
            txn.intent = ABORTED  # nothing asked a commit: it can only abort
        try:
            self._producer.abort_transaction(TIMEOUT_S)
        except KafkaException as abort_error:
            self.errors[f"abort: {abort_error.args[0].name()}"] += 1
            self.history.end(txn, INFO if asked_commit else ABORTED, f"{name}; abort failed")
            self._close()
            return
        self.history.end(txn, INFO if asked_commit else ABORTED, f"{name}; aborted")


class TxnWorkload(Workload):
    """`TxnProducer`s writing transactions; a read_uncommitted and a read_committed reader."""

    def setup(self) -> None:
        c = self.config
        self.create_topic()
        self.producers = [
            TxnProducer(
                self.history,
                self.cluster.bootstrap,
                c.topic,
                f"txn-{i}",
                partitions=c.partitions,
                rate=c.rate,
                abort_ratio=c.abort_ratio,
                seed=c.seed,
            )
            for i in range(c.txn_producers)
        ]
        self.consumers = [
            LiveConsumer(self.history, self.cluster.bootstrap, c.topic, c.partitions, name, level)
            for name, level in (("live", "read_uncommitted"), (READ_COMMITTED, "read_committed"))
        ]
