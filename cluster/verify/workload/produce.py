"""The produce workload: producers writing continuously to one multi-partition topic and a consumer
reading it throughout, all recording into a `History`.

Producers (each record ``key=b"<name>-<seq>"``, ``value=b"<name> <seq>"``, no partition given, so
the client's partitioner spreads them):

- `PyProducer` - confluent-kafka (librdkafka), acks=all, enable.idempotence on or off;
- `JavaProducer` - the Java client through ``RafkaDriver produce-stream`` with the client's
  *default* settings (acks=all and enable.idempotence=true since kafka-clients 3.0), one JSON
  line per send / ack / failure on its stdout. The driver's command comes with the config
  (``java_command``: the test suite's client drivers, tests/integration/clients).

`LiveConsumer` - confluent-kafka, ``assign`` every partition at the beginning (no group), records
every record it is handed, in order (the checker flags offsets that do not strictly increase per
partition, and skipped ones).

`Workload` wires them up for a `LocalCluster`: topic creation with the wanted replication factor
and min.insync.replicas, start, stop (drain), and catching the consumer up at the end.

How a failed delivery is classified (see history.py): *definite* only when the record can't have
reached a broker (librdkafka: purged from its queue, rejected locally; Java: ``send()`` threw);
everything else - timeouts, lost connections, broker errors after retries that may follow an
appended attempt - is indeterminate.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka import version as ck_version
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from cluster.verify.history import History, ProducerInfo

log = logging.getLogger("verify.workload")
# librdkafka's own log lines (disconnects while brokers die...) go here, not to stderr.
_rdkafka_log = logging.getLogger("verify.rdkafka")

INIT_PRODUCER_ID = 22
API_VERSIONS = 18

# librdkafka delivery errors after which the record cannot have been appended anywhere.
_DEFINITE = {
    KafkaError._PURGE_QUEUE,  # purged before it was ever sent
    KafkaError.MSG_SIZE_TOO_LARGE,  # refused whole: no attempt of it was appended
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._INVALID_ARG,
    KafkaError._QUEUE_FULL,
}


# ---------------------------------------------------------------------------------- broker probe


def supported_apis(bootstrap: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 against the first reachable broker: api key -> (min, max) version."""
    last: Exception | None = None
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as sock:
                client_id = b"chaos"
                body = struct.pack(">hhih", API_VERSIONS, 0, 1, len(client_id)) + client_id
                sock.sendall(struct.pack(">i", len(body)) + body)
                (size,) = struct.unpack(">i", _recv_exact(sock, 4))
                resp = _recv_exact(sock, size)
        except OSError as e:
            last = e
            continue
        _corr, error, count = struct.unpack_from(">ihi", resp, 0)
        if error:
            raise RuntimeError(f"ApiVersions error {error} from {address}")
        apis = {}
        for i in range(count):
            key, lo, hi = struct.unpack_from(">hhh", resp, 10 + 6 * i)
            apis[key] = (lo, hi)
        return apis
    raise RuntimeError(f"no broker of {bootstrap} answered ApiVersions: {last}")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def supports_idempotence(bootstrap: str) -> bool:
    """Whether the broker serves InitProducerId (what idempotent producers need first)."""
    return INIT_PRODUCER_ID in supported_apis(bootstrap)


# ------------------------------------------------------------------------------------ producers


def rdkafka_conf(bootstrap: str, **extra: object) -> dict:
    return {"bootstrap.servers": bootstrap, "logger": _rdkafka_log, **extra}


class PyProducer:
    """confluent-kafka producer thread: one record every 1/rate s until stopped."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        name: str,
        *,
        idempotent: bool,
        rate: float,
        message_timeout_s: float = 60.0,
        conf: dict | None = None,
    ) -> None:
        self.history, self.topic, self.name, self.rate = history, topic, name, rate
        self.conf = rdkafka_conf(
            bootstrap,
            acks="all",
            **{
                "enable.idempotence": idempotent,
                "message.timeout.ms": int(message_timeout_s * 1000),
                "linger.ms": 5,
                "error_cb": self._on_error,
            },
            **(conf or {}),
        )
        history.add_producer(
            ProducerInfo(name, f"confluent-kafka {ck_version()[0]}", idempotent, "all")
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)
        self._producer: Producer | None = None
        self.errors: Counter[str] = Counter()
        self.fatal: str | None = None

    def start(self) -> None:
        self._producer = Producer(self.conf)
        self._thread.start()

    def signal_stop(self) -> None:
        self._stop.set()

    def stop(self, drain_s: float = 30.0) -> None:
        """Stop sending; wait up to ``drain_s`` for outstanding deliveries, then purge the rest
        (queued: definite failures; in flight: indeterminate). Harmless when already stopped."""
        self._stop.set()
        if self._producer is None:
            return
        self._thread.join()
        left = self._producer.flush(drain_s)
        if left:
            self.history.note(f"{self.name}: {left} deliveries outstanding after {drain_s}s")
            self._producer.purge()
            self._producer.flush(5)
        self._producer = None

    def _on_error(self, err: KafkaError) -> None:
        self.errors[err.name()] += 1
        if err.fatal() and self.fatal is None:
            self.fatal = str(err)
            self.history.note(f"{self.name}: fatal producer error: {err}")

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        value = msg.value()  # type: ignore[attr-defined]
        if err is None:
            self.history.ack(value, msg.partition(), msg.offset())  # type: ignore[attr-defined]
        else:
            self.history.fail(value, err.name(), definite=err.code() in _DEFINITE)

    def _run(self) -> None:
        producer = self._producer
        assert producer is not None
        gap, seq = 1.0 / self.rate, 0
        next_t = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_t:
                producer.poll(min(next_t - now, 0.05))
                continue
            next_t = max(next_t + gap, now - 1.0)  # behind by more than 1 s: no burst
            attempt = self.history.send(self.name, seq)
            seq += 1
            try:
                producer.produce(
                    self.topic, value=attempt.value, key=attempt.key, on_delivery=self._on_delivery
                )
            except BufferError:
                self.history.fail(attempt.value, "BufferError (queue full)", definite=True)
            except KafkaException as e:  # a fatal error: nothing is accepted any more
                self.history.fail(attempt.value, f"produce(): {e}", definite=True)
            producer.poll(0)


class JavaProducer:
    """The Java client (``RafkaDriver produce-stream``, launched by ``command``) in its own JVM,
    default settings unless ``idempotence`` / ``extra`` say otherwise."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        name: str,
        *,
        rate: float,
        command: tuple[str, ...],
        version: str = "4.3.0",
        idempotence: bool | None = None,  # None: the client's default (on since 3.0)
        max_duration_s: float = 600.0,
        drain_s: float = 30.0,
        extra: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.history, self.name, self.drain_s = history, name, drain_s
        self.argv = [
            *command,
            "produce-stream",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--producer-id",
            name,
            "--rate",
            str(rate),
            "--duration",
            str(max_duration_s),
            "--drain",
            str(drain_s),
            "--stop-on-eof",
            "true",
        ]
        if idempotence is not None:
            self.argv += ["--idempotence", str(idempotence).lower()]
        for k, v in (extra or {}).items():
            self.argv += [f"--{k}", v]
        note = "client defaults" if idempotence is None else f"enable.idempotence={idempotence}"
        history.add_producer(
            ProducerInfo(name, f"java {version}", idempotence is not False, "all (default)", note)
        )
        self.stderr_path = (log_dir or Path("/tmp")) / f"{name}.stderr"
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = threading.Thread(
            target=self._read, name=f"reader-{name}", daemon=True
        )
        self.done: dict | None = None
        self.errors: Counter[str] = Counter()

    def start(self) -> None:
        self._stderr = self.stderr_path.open("w")
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
        )
        assert self._reader is not None
        self._reader.start()

    def signal_stop(self) -> None:
        """Close its stdin: it stops sending, then drains for up to drain_s and exits."""
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()

    def stop(self, timeout_s: float | None = None) -> None:
        """`signal_stop` and wait for the JVM (killed after its drain time plus a margin).
        Harmless when already stopped."""
        if self._proc is None or self._reader is None:
            return
        self.signal_stop()
        try:
            self._proc.wait(timeout_s if timeout_s is not None else self.drain_s + 30)
        except subprocess.TimeoutExpired:
            self.history.note(f"{self.name}: JVM did not exit after its drain; killed")
            self._proc.kill()
            self._proc.wait()
        self._reader.join(10)
        self._reader = None
        self._stderr.close()
        if self._proc.returncode != 0:
            self.history.note(
                f"{self.name}: exited {self._proc.returncode}; stderr in {self.stderr_path}"
            )

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                self.history.note(f"{self.name}: unparsable line {line[:200]!r}")
                continue
            t = ev.get("t", time.time() * 1000) / 1000
            kind = ev.get("event")
            if kind == "send":
                seq = int(ev["key"].rpartition("-")[2])
                self.history.send(self.name, seq, t)
            elif kind == "ack":
                self.history.ack(ev["value"].encode("latin-1"), ev["partition"], ev["offset"], t)
            elif kind == "fail":
                self.errors[ev["error"]] += 1
                self.history.fail(
                    ev["value"].encode("latin-1"),
                    f"{ev['error']}: {ev['message']}",
                    definite=bool(ev["unsent"]),
                    t=t,
                )
            elif kind == "done":
                self.done = ev


# ------------------------------------------------------------------------------------- consumer


class LiveConsumer:
    """Reads every partition from the beginning throughout the run (assign, no group), at
    ``isolation`` (Kafka's isolation.level)."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        partitions: int,
        name: str,
        isolation: str = "read_uncommitted",
    ):
        self.history, self.topic, self.partitions, self.name = history, topic, partitions, name
        self.conf = rdkafka_conf(
            bootstrap,
            **{
                "group.id": f"chaos-{name}",  # required by the client; no group is joined
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "auto.offset.reset": "earliest",
                "isolation.level": isolation,
            },
        )
        # next offset per partition: past the last record handed over, or past the control
        # records and aborted transactions the client skipped (the checker judges the records)
        self.position: dict[int, int] = {}
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"consumer-{name}", daemon=True)
        self._consumer: Consumer | None = None

    def start(self) -> None:
        consumer = Consumer(self.conf)
        consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
        )
        self._consumer = consumer
        self._thread.start()

    def catch_up(self, high: dict[int, int], timeout_s: float) -> bool:
        """Wait (polling, with a deadline) until this consumer has read up to ``high``."""
        deadline = time.monotonic() + timeout_s
        while not all(self.position.get(p, 0) >= h for p, h in high.items()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """Harmless when already stopped (or never started)."""
        self._stop.set()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            self._thread.join(30)
            consumer.close()

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set():
            for m in consumer.consume(500, 0.2):
                err = m.error()
                if err is not None:
                    self.errors[err.name()] += 1
                    continue
                p, o = m.partition(), m.offset()
                assert p is not None and o is not None  # a record, not an error
                self.history.read(self.name, p, o, m.key(), m.value())
                self.position[p] = max(self.position.get(p, 0), o + 1)
            for tp in consumer.position(self._assigned()):
                if tp.offset >= 0:
                    self.position[tp.partition] = max(self.position.get(tp.partition, 0), tp.offset)

    def _assigned(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in range(self.partitions)]


# ------------------------------------------------------------------------------------- workload


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    replication_factor: int,
    min_insync_replicas: int,
    timeout_s: float = 60.0,
) -> None:
    """Create the topic and poll until every partition has a leader in metadata."""
    admin = AdminClient(rdkafka_conf(bootstrap))
    new = NewTopic(
        topic,
        partitions,
        replication_factor,
        config={"min.insync.replicas": str(min_insync_replicas)},
    )
    admin.create_topics([new])[topic].result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        ready = md is not None and md.error is None and len(md.partitions) == partitions
        if ready and md is not None and all(p.leader >= 0 for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic}: partitions without a leader after {timeout_s}s")
        time.sleep(0.1)


@dataclass
class WorkloadConfig:
    topic: str = "chaos"
    partitions: int = 6
    replication_factor: int = 3
    min_insync_replicas: int = 2
    rate: float = 100.0  # records/s per producer
    idempotent_py: bool = True  # (a) confluent-kafka, acks=all, enable.idempotence=true
    plain_py: bool = True  # (b) confluent-kafka, acks=all, enable.idempotence=false
    java: str | None = None  # (c) Java client (its version) with its defaults; None: none
    java_command: tuple[str, ...] = ()  # how to launch that version's RafkaDriver
    java_idempotence: bool | None = None  # None: the client's default (on since 3.0)
    message_timeout_s: float = 60.0
    drain_s: float = 30.0
    extra_java: dict[str, str] = field(default_factory=dict)
    # the transactional workload (workload/txn.py)
    kind: str = "produce"  # or "txn", "ctp", "group"
    txn_producers: int = 2
    abort_ratio: float = 0.2  # transactions aborted on purpose
    seed: int = 0
    # the consumer-group workload (workload/group.py)
    group_members: int = 3
    churn_s: float = 5.0  # a member joins, leaves or is killed this often
    group_protocol: str = "classic"  # or "consumer" (KIP-848)
    # consume-transform-produce (workload/ctp.py)
    ctp_workers: int = 2


class Workload:
    """Producers + a live consumer against a cluster; `start`, then `stop` (drains)."""

    def __init__(self, cluster: LocalCluster, history: History, config: WorkloadConfig) -> None:
        self.cluster, self.history, self.config = cluster, history, config
        self.producers: list[PyProducer | JavaProducer] = []
        self.consumers: list[LiveConsumer] = []
        self.idempotence = False

    def create_topic(self) -> None:
        c = self.config
        create_topic(
            self.cluster.bootstrap,
            c.topic,
            c.partitions,
            c.replication_factor,
            c.min_insync_replicas,
        )

    def setup(self) -> None:
        c = self.config
        bootstrap = self.cluster.bootstrap
        self.create_topic()
        self.idempotence = supports_idempotence(bootstrap)
        if c.idempotent_py:
            if self.idempotence:
                self.producers.append(self._py("py-idem", idempotent=True))
            else:
                self.history.note(
                    "py-idem skipped: the broker has no InitProducerId (idempotent producer)"
                )
        if c.plain_py:
            self.producers.append(self._py("py-plain", idempotent=False))
        if c.java:
            if not c.java_command:
                raise ValueError(f"a Java {c.java} producer needs java_command (its driver)")
            idem = c.java_idempotence
            if idem is not False and not self.idempotence:
                idem = False  # the default (on) cannot even start without InitProducerId
                self.history.note(
                    "java: enable.idempotence=false instead of the default: the broker has no "
                    "InitProducerId"
                )
            self.producers.append(
                JavaProducer(
                    self.history,
                    bootstrap,
                    c.topic,
                    "java",
                    rate=c.rate,
                    command=c.java_command,
                    version=c.java,
                    idempotence=idem,
                    drain_s=c.drain_s,
                    extra=c.extra_java,
                    log_dir=self.cluster.data_dir / "logs",
                )
            )
        self.consumers = [LiveConsumer(self.history, bootstrap, c.topic, c.partitions, "live")]

    def _py(self, name: str, *, idempotent: bool) -> PyProducer:
        c = self.config
        return PyProducer(
            self.history,
            self.cluster.bootstrap,
            c.topic,
            name,
            idempotent=idempotent,
            rate=c.rate,
            message_timeout_s=c.message_timeout_s,
        )

    def start(self) -> None:
        assert self.consumers, "setup() first"
        for c in self.consumers:
            c.start()
        for p in self.producers:
            p.start()

    def wait_for_acks(self, count: int, timeout_s: float) -> bool:
        """Poll until ``count`` records are acknowledged (a warm-up before faults)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sum(a.outcome == "ok" for a in list(self.history.attempts.values())) >= count:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop every producer at once, wait for each to drain, close the history's books.
        The consumers keep reading (see `catch_up`)."""
        self.history.t_stop = time.time()
        for p in self.producers:
            p.signal_stop()
        for p in self.producers:
            if isinstance(p, JavaProducer):
                p.stop()
            else:
                p.stop(self.config.drain_s)
        self.history.finish()

    def abort(self) -> None:
        """After an error: stop whatever still runs, quickly, leaving no thread or JVM behind."""
        for p in self.producers:
            p.signal_stop()
        for p in self.producers:
            if isinstance(p, JavaProducer):
                p.stop(timeout_s=5)
            else:
                p.stop(1.0)
        self.stop_consumers()

    def catch_up(self, high: dict[int, int], timeout_s: float) -> bool:
        """Whether every live consumer reached ``high`` within ``timeout_s`` (together)."""
        deadline = time.monotonic() + timeout_s
        return all(c.catch_up(high, max(0.0, deadline - time.monotonic())) for c in self.consumers)

    def stop_consumers(self) -> None:
        for c in self.consumers:
            c.stop()

    def summary(self) -> str:
        lines = []
        for p in self.producers:
            if p.errors:
                lines.append(f"  {p.name} client errors: {dict(p.errors.most_common(6))}")
        for c in self.consumers:
            if c.errors:
                lines.append(f"  {c.name} consumer errors: {dict(c.errors.most_common(6))}")
        return "\n".join(lines)
