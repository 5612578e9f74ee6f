"""Single-broker throughput with librdkafka, side by side with the native broker noida-db.

    python bench/produce_consume.py [--mb 2000] [--partitions 6] [--skip-noida]

Prints, for 1 KiB records with acks=1: produce MB/s and consume MB/s for Rafka (1 meta node,
1 broker, separate processes) and for noida-db, beside the raw disk-append MB/s of the same
run; then the time to create a topic with 1,000 partitions and the broker's resident memory
afterwards. Figures only: nothing here fails on a timing. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.log_append import raw_append_mb_s
from cluster.local import LocalCluster, free_base_port

MB = 1_000_000
RECORD = 1024


def _wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {port}")


def create_topic(bootstrap: str, name: str, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    start = time.perf_counter()
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    return time.perf_counter() - start


def produce(bootstrap: str, topic: str, total_mb: int, acks: str = "1") -> float:
    """MB/s from the first send to the last delivery report."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
            "enable.idempotence": False,
            "message.timeout.ms": 60_000,
        }
    )
    value = b"x" * RECORD
    count = total_mb * MB // RECORD
    failed: list = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
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


def consume(bootstrap: str, topic: str, partitions: int, total_mb: int) -> float:
    """MB/s reading everything back from offset 0 (assign, no group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 1_048_576,
            "queued.max.messages.kbytes": 262_144,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    want = total_mb * MB // RECORD
    got = 0
    start = time.perf_counter()
    deadline = start + 300
    while got < want and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return got * RECORD / MB / elapsed


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench_rafka(work: Path, args: argparse.Namespace) -> dict[str, float]:
    base = args.base_port or free_base_port(1, 1)
    cluster = LocalCluster(1, 1, work / "rafka", base, {}, log_level="WARNING")
    cluster.start()
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, "bench", args.partitions)
        out = {"produce": produce(bootstrap, "bench", args.mb)}
        out["consume"] = consume(bootstrap, "bench", args.partitions, args.mb)
        out["create_1000"] = create_topic(bootstrap, "wide", 1000)
        proc = cluster.nodes["broker-1"].proc
        assert proc is not None
        out["rss_mb"] = rss_mb(proc.pid)
        return out
    finally:
        cluster.stop()


def bench_noida(work: Path, args: argparse.Namespace) -> dict[str, float] | None:
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
    )
    try:
        _wait_port(port)
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "bench", args.partitions)
        out = {"produce": produce(bootstrap, "bench", args.mb)}
        out["consume"] = consume(bootstrap, "bench", args.partitions, args.mb)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


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
        disk = raw_append_mb_s(work / "raw.bin", 3.0)
        rafka = bench_rafka(work, args)
        noida = None if args.skip_noida else bench_noida(work, args)
    print(f"\n{args.mb} MB of {RECORD} B records, acks=1, {args.partitions} partitions, librdkafka")
    print(f"{'':24}{'produce MB/s':>14}{'consume MB/s':>14}")
    print(f"{'raw disk append':24}{disk:>14.0f}{'':>14}")
    print(f"{'rafka':24}{rafka['produce']:>14.0f}{rafka['consume']:>14.0f}")
    if noida:
        print(f"{'noida-db':24}{noida['produce']:>14.0f}{noida['consume']:>14.0f}")
    print(
        f"rafka: create topic with 1000 partitions: {rafka['create_1000']:.2f} s; "
        f"broker RSS afterwards: {rafka['rss_mb']:.0f} MB"
    )


if __name__ == "__main__":
    main()
