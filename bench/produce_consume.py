"""Single-broker throughput with librdkafka, side by side with the native broker noida-db.

    python bench/produce_consume.py [--mb 2000] [--partitions 6] [--skip-noida]

Prints, for 1 KiB records with acks=1: produce MB/s and consume MB/s for Rafka (1 meta node,
1 broker, separate processes) and for noida-db, beside the raw disk-append MB/s of the same
run; then the time to create a topic with 1,000 partitions and the broker's resident memory
afterwards. Figures only: nothing here fails on a timing. MB = 10^6 bytes.

Every measured phase starts with the page cache written back (`os.sync()`): on this VM the
writeback of an earlier phase's dirty pages otherwise takes CPU from the next one, and the
figures would depend on the order of the phases. A consumer that makes no progress for
15 s stops and prints why (librdkafka's last error), rather than a rate of 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import MB, RECORD
from bench.log_append import raw_append_mb_s
from cluster.local import LocalCluster, free_base_port


def _wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {port}")


_STALL_S = 15.0  # a consumer with no new record for this long has stalled


class ConsumeStalled(RuntimeError):
    """The consumer got nothing for `_STALL_S` seconds."""


def create_topic(bootstrap: str, name: str, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.perf_counter()
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    return time.perf_counter() - start


def bench_producer(bootstrap: str, acks: str, **extra: object) -> Producer:
    """The benches' librdkafka producer: large batches, no compression, no idempotence."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
            "enable.idempotence": False,
            "message.timeout.ms": 60_000,
            **extra,
        }
    )


def produce(bootstrap: str, topic: str, total_mb: int, acks: str = "1", **conf: object) -> float:
    """MB/s from the first send to the last delivery report (`conf`: more librdkafka
    settings, e.g. security)."""
    return send_all(bench_producer(bootstrap, acks, **conf), topic, total_mb)


def send_all(producer: Producer, topic: str, total_mb: int, keys: int = 0) -> float:
    """`produce` with a producer of the caller's (`keys`: that many distinct keys in turn, for
    the partitioner to spread over the partitions; 0: no key)."""
    value = b"x" * RECORD
    count = total_mb * MB // RECORD
    key_of: list[bytes | None] = [str(k).encode() for k in range(keys)] or [None]
    failed: list = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(count):
        key = key_of[i % len(key_of)]
        while True:
            try:
                producer.produce(topic, value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if failed:
            break
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if failed or left:
        raise RuntimeError(f"{len(failed)} deliveries failed ({failed[:1]}), {left} unanswered")
    return count * RECORD / MB / elapsed


def consume(bootstrap: str, topic: str, partitions: int, total_mb: int, **conf: object) -> float:
    """MB/s reading everything back from offset 0 (assign, no group; `conf`: more librdkafka
    settings)."""
    errors: list[str] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 1_048_576,
            "queued.max.messages.kbytes": 262_144,
            "error_cb": lambda err: errors.append(str(err)),
            "logger": _Quiet(errors),
            **conf,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    want = total_mb * MB // RECORD
    got = 0
    start = last_progress = time.perf_counter()
    try:
        while got < want:
            before = got
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    got += 1
            now = time.perf_counter()
            if got > before:
                last_progress = now
            elif now - last_progress > _STALL_S:
                reason = errors[-1] if errors else "no error reported"
                raise ConsumeStalled(
                    f"{got} of {want} records, then nothing for {_STALL_S:g}s ({reason})"
                )
    finally:
        consumer.close()
    return got * RECORD / MB / (time.perf_counter() - start)


class _Quiet:
    """A librdkafka logger that keeps messages instead of printing them."""

    def __init__(self, sink: list[str]) -> None:
        self._sink = sink

    def log(self, _level: int, fmt: str, *args: object) -> None:
        self._sink.append(fmt % args if args else fmt)


def try_or_say(what: str, fn: Callable[[], object]) -> object | None:
    """fn(), or None after printing why it failed (a bench prints what it could measure)."""
    try:
        return fn()
    except Exception as e:
        print(f"  {what}: n/a ({type(e).__name__}: {e})")
        return None


def measure(fn: Callable[[], float]) -> float | str:
    """A phase's MB/s after writing back the page cache, or why it could not be measured."""
    os.sync()
    try:
        return fn()
    except (ConsumeStalled, RuntimeError) as e:
        return f"n/a: {e}"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_rafka(work: Path, args: argparse.Namespace) -> dict[str, float | str]:
    base = args.base_port or free_base_port(1, 1)
    cluster = LocalCluster(1, 1, work / "rafka", base, {}, log_level="WARNING")
    cluster.start()
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, "bench", args.partitions)
        out: dict[str, float | str] = {
            "produce": measure(lambda: produce(bootstrap, "bench", args.mb))
        }
        out["consume"] = measure(lambda: consume(bootstrap, "bench", args.partitions, args.mb))
        out["create_1000"] = create_topic(bootstrap, "wide", 1000)
        proc = cluster.nodes["broker-1"].proc
        assert proc is not None
        out["rss_mb"] = rss_mb(proc.pid)
        return out
    finally:
        cluster.stop()


def bench_noida(work: Path, args: argparse.Namespace) -> dict[str, float | str] | None:
    exe = shutil.which("noida-db") or str(Path(sys.executable).parent / "noida-db")
    if not Path(exe).exists():
        print("noida-db is not installed (pip install noida-db): skipping it")
        return None
    port = (args.base_port or free_base_port(1, 1)) + 500
    proc = subprocess.Popen(
        [
            exe,
            "start",
            "--data-dir",
            str(work / "noida"),
            "--only",
            "kafka",
            "--kafka-port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: stopped with whatever it starts
    )
    try:
        _wait_port(port)
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "bench", args.partitions)
        out: dict[str, float | str] = {
            "produce": measure(lambda: produce(bootstrap, "bench", args.mb))
        }
        out["consume"] = measure(lambda: consume(bootstrap, "bench", args.partitions, args.mb))
        return out
    finally:
        _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """Ctrl-C to noida-db's process group (how `noida-db start` is stopped: it ignores
    SIGTERM), then SIGKILL to whatever is left of the group after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        proc.poll()  # reap the wrapper so that it does not keep the group alive as a zombie
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=2000, help="MB to produce (default 2000)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--base-port", type=int, default=0, help="default: a free range")
    parser.add_argument("--skip-noida", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        work = Path(tmp)
        os.sync()
        disk = raw_append_mb_s(work / "raw.bin", 3.0)
        rafka = bench_rafka(work, args)
        noida = None if args.skip_noida else bench_noida(work, args)
    print(f"\n{args.mb} MB of {RECORD} B records, acks=1, {args.partitions} partitions, librdkafka")
    print(f"{'':24}{'produce MB/s':>14}{'consume MB/s':>14}")
    print(f"{'raw disk append':24}{disk:>14.0f}{'':>14}")
    notes = []
    for name, figures in (("rafka", rafka), ("noida-db", noida)):
        if figures is None:
            continue
        cells = []
        for phase in ("produce", "consume"):
            value = figures[phase]
            if isinstance(value, str):
                notes.append(f"{name} {phase} {value}")
                value = "n/a"
            cells.append(f"{value:>14.0f}" if isinstance(value, float) else f"{value:>14}")
        print(f"{name:24}{''.join(cells)}")
    for note in notes:
        print(f"  {note}")
    print(
        f"rafka: create topic with 1000 partitions: {rafka['create_1000']:.2f} s; "
        f"broker RSS afterwards: {rafka['rss_mb']:.0f} MB"
    )


if __name__ == "__main__":
    main()
