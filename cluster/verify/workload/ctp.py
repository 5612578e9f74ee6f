"""The consume-transform-produce workload (``rafka verify --workload ctp``): the txn workload's
transactional producers write seed records (some transactions aborted on purpose), and
``ctp_workers`` transformers - each a consumer of group ``verify-ctp`` (read_committed, classic
protocol) and a transactional producer - consume the topic and, in one transaction per batch,
write one transformed record per consumed record to a random partition of the same topic and
commit the batch's offsets with it (send_offsets_to_transaction with the consumer's group
metadata, so a member fenced by a rebalance cannot commit).

A record's hop count is in its value: a seed is hop 0, the transform of a hop-h record is hop h+1
with value ``<worker> <seq>|<h+1>:<source value>``; hop `HOPS` records are consumed and their
offsets committed, nothing more. Transformers thus read what other transformers' transactions
wrote: the checker's write-read dependencies (checker/cycles.py). A batch that is not known to
be committed (aborted on purpose, or failed) is consumed again from the group's committed
offsets. Everything is recorded: each batch is a `Txn` with its reads, writes and offsets.
"""

from __future__ import annotations

import contextlib
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from cluster.verify.history import ABORTED, COMMITTED, History, head, hop_of
from cluster.verify.workload.produce import rdkafka_conf
from cluster.verify.workload.txn import TIMEOUT_S, TxnProducer, TxnWorkload

CTP_GROUP = "verify-ctp"
HOPS = 2  # seed (0) -> 1 -> 2, which is consumed and not transformed
_IDLE_S = 5.0  # the transformers are done when none has been handed a record for this long


class CtpWorker(TxnProducer):
    """A transformer: consume a batch, transform it in one transaction, commit, repeat."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        name: str,
        *,
        partitions: int,
        abort_ratio: float,
        seed: int,
    ) -> None:
        super().__init__(
            history,
            bootstrap,
            topic,
            name,
            partitions=partitions,
            rate=float("inf"),  # as fast as it is handed records
            abort_ratio=abort_ratio,
            seed=seed,
        )
        self.consumer_conf = rdkafka_conf(
            bootstrap,
            **{
                "group.id": CTP_GROUP,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
            },
        )
        self.last_read = time.monotonic()
        self._consumer: Consumer | None = None

    @property
    def batches(self) -> int:
        """How many batches it has been handed so far."""
        return self._count

    def start(self) -> None:
        self._consumer = Consumer(self.consumer_conf)
        self._consumer.subscribe([self.topic])
        super().start()

    def stop(self, drain_s: float = 30.0) -> None:
        super().stop(drain_s)
        consumer, self._consumer = self._consumer, None
        if consumer is not None and not self._thread.is_alive():
            consumer.close()

    def _transaction(self) -> int:
        producer, consumer = self._producer, self._consumer
        assert producer is not None and consumer is not None
        batch = [m for m in consumer.consume(200, 0.5) if m.error() is None]
        if not batch:
            return 0
        self.last_read = time.monotonic()
        self._count += 1
        txn = self.history.begin(f"{self.name}#{self._count}", self.name)
        want = ABORTED if self._rng.random() < self.abort_ratio else COMMITTED
        for m in batch:
            p, o, value = m.partition(), m.offset(), m.value()
            assert p is not None and o is not None
            self.history.read(self.name, p, o, m.key(), value)
            txn.reads.append((p, o, "" if value is None else value.decode("latin-1")))
            txn.offsets[p] = max(txn.offsets.get(p, 0), o + 1)
        try:
            producer.begin_transaction()
            for m in batch:
                self._transform(producer, m, txn.id, txn.writes)
            producer.send_offsets_to_transaction(
                [TopicPartition(self.topic, p, o) for p, o in txn.offsets.items()],
                consumer.consumer_group_metadata(),
                TIMEOUT_S,
            )
            txn.intent, txn.t_commit = want, time.time()
            if want == COMMITTED:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.flush(TIMEOUT_S)
                producer.abort_transaction(TIMEOUT_S)
            self.history.end(txn, want)
        except (KafkaException, BufferError) as e:
            self._failed(txn, e)
        if txn.outcome != COMMITTED:
            self._rewind(consumer, list(txn.offsets))
        return len(txn.writes)

    def _transform(self, producer: Producer, m: Message, txn: str, writes: list[str]) -> None:
        hop = hop_of(m.value())
        if hop >= HOPS:
            return
        attempt = self.history.send(
            self.name, self._seq, txn=txn, payload=f"{hop + 1}:{head(m.value())}"
        )
        self._seq += 1
        writes.append(attempt.value.decode("latin-1"))
        producer.produce(
            self.topic,
            value=attempt.value,
            key=attempt.key,
            partition=self._rng.randrange(self.partitions),
            on_delivery=self._on_delivery,
        )

    def _rewind(self, consumer: Consumer, partitions: list[int]) -> None:
        """Back to the group's committed offsets (what a batch not known to be committed left);
        when the coordinator cannot say, a new consumer (it starts from them too)."""
        tps = [TopicPartition(self.topic, p) for p in partitions]
        try:
            for tp in consumer.committed(tps, TIMEOUT_S):
                tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                consumer.seek(tp)
        except KafkaException as e:
            self.errors[f"rewind: {e.args[0].name()}"] += 1
            with contextlib.suppress(KafkaException):
                consumer.close()
            self._consumer = Consumer(self.consumer_conf)
            self._consumer.subscribe([self.topic])


class CtpWorkload(TxnWorkload):
    """The txn workload's seed producers and readers, and the transformers."""

    def setup(self) -> None:
        super().setup()
        c = self.config
        self.workers = [
            CtpWorker(
                self.history,
                self.cluster.bootstrap,
                c.topic,
                f"ctp-{i}",
                partitions=c.partitions,
                abort_ratio=c.abort_ratio,
                seed=c.seed,
            )
            for i in range(c.ctp_workers)
        ]
        self.seeds = list(self.producers)
        self.producers += self.workers

    def wait_for_acks(self, count: int, timeout_s: float) -> bool:
        """The seeds' warm-up, then until the transformers have been handed records (each of
        them, as far as there are partitions for each): the group forms only after its initial
        rebalance delay, and a fault before that tests the join, not a pipeline that runs."""
        deadline = time.monotonic() + timeout_s
        if not super().wait_for_acks(count, timeout_s):
            return False
        running = min(len(self.workers), self.config.partitions)
        while sum(w.batches > 0 for w in self.workers) < running:
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"the transformers of group {CTP_GROUP} were handed no records within "
                    f"{timeout_s:.0f}s of the start: the group did not form; its coordinator's "
                    "log says why"
                )
            time.sleep(0.1)
        return True

    def stop(self) -> None:
        """The seeds first; the transformers once they have been idle for a while (they have
        transformed everything, or are stuck: the checker judges what was committed); then the
        group's committed offsets, for the checker."""
        self.history.t_stop = time.time()
        for p in self.seeds:
            p.signal_stop()
        for p in self.seeds:
            p.stop(self.config.drain_s)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            time.monotonic() - w.last_read < _IDLE_S for w in self.workers
        ):
            time.sleep(0.2)
        for w in self.workers:
            w.signal_stop()
        for w in self.workers:
            w.stop(self.config.drain_s)
        self.history.finish()
        self._snapshot()

    def _snapshot(self) -> None:
        c = self.config
        consumer = Consumer(rdkafka_conf(self.cluster.bootstrap, **{"group.id": CTP_GROUP}))
        try:
            tps = [TopicPartition(c.topic, p) for p in range(c.partitions)]
            committed = consumer.committed(tps, 30)
            self.history.snapshot(CTP_GROUP, {tp.partition: tp.offset for tp in committed})
        except KafkaException as e:
            self.history.note(f"{CTP_GROUP}: its committed offsets could not be read: {e}")
        finally:
            consumer.close()
