"""Log storage benchmark: raw disk appends vs `PartitionLog.append_as_leader`, and reads.

Prints figures and asserts nothing. The produce path's target is ~250 MB/s on 2 cores, with
~1 MiB requests of 1 KiB records; this measures the log's share of it on one core:

    python bench/log_append.py [--seconds 3] [--dir /tmp] [--profile]

MB means 10^6 bytes. `raw_append_mb_s` is also imported by the broker benchmark as the ceiling
the disk (in practice, the page cache) allows.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import pstats
import tempfile
import time
from pathlib import Path

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from dataplane.log import LogConfig, PartitionLog, StateStore

MB = 1_000_000
CHUNK = 1 << 20  # 1 MiB: the size of one produce request here
RECORD_VALUE = 1024  # 1 KiB records
_RECORD_OVERHEAD = 10  # per-record varints of a 1 KiB keyless record, about


def raw_append_mb_s(path: Path, seconds: float) -> float:
    """MB/s of plain 1 MiB ``write()`` calls appending to the file ``path`` for ``seconds``
    (no fsync, like the log's default); the file is removed afterwards."""
    chunk = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    written = 0
    start = now = time.perf_counter()
    try:
        while now - start < seconds:
            os.write(fd, chunk)
            written += CHUNK
            now = time.perf_counter()
    finally:
        os.close(fd)
        path.unlink()
    return written / MB / (now - start)


def produce_request() -> bytes:
    """One uncompressed batch of 1 KiB records filling 1 MiB, as a producer sends it."""
    count = (CHUNK - 61) // (RECORD_VALUE + _RECORD_OVERHEAD)
    stamp = TZAwareMicros.parse(datetime.datetime.now(datetime.UTC))
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=stamp,
            offset=i64(i),
            key=None,
            value=os.urandom(RECORD_VALUE),
            headers=(),
        )
        for i in range(count)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        records=records,
        attributes=i16(0),
    )
    out = io.BytesIO()
    write_new_batch(out, batch)
    return out.getvalue()


def _append_for(log: PartitionLog, request: bytes, seconds: float) -> tuple[int, float]:
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        log.append_as_leader(request, 0, time.time_ns() // 1_000_000)
        calls += 1
    return calls, time.perf_counter() - start


def _read_all(log: PartitionLog) -> tuple[int, float]:
    offset, total, start = log.log_start_offset, 0, time.perf_counter()
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, CHUNK, end, True)
        total += len(data)
        offset += int.from_bytes(data[23:27], "big") + 1  # one batch per read here
    return total, time.perf_counter() - start


def _profile(log: PartitionLog, request: bytes, calls: int, top: int) -> None:
    """Split an append's time between write() and everything else the log does (cProfile,
    which inflates the Python part somewhat)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        log.append_as_leader(request, 0, time.time_ns() // 1_000_000)
    profiler.disable()
    rows = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tottime for _, _, tottime, _, _ in rows.values()) / calls
    write = sum(row[2] for (_, _, name), row in rows.items() if "posix.write" in name) / calls
    print(
        f"per append (profiled): {total * 1e6:.0f} us = write() {write * 1e6:.0f} us"
        f" + log work {(total - write) * 1e6:.0f} us"
    )
    for (filename, line, name), (_, ncalls, tottime, _, _) in sorted(
        rows.items(), key=lambda kv: -kv[1][2]
    )[:top]:
        where = f"{Path(filename).name}:{line}" if line else ""
        print(f"  {tottime / calls * 1e6:8.1f} us  {ncalls // calls:>3}x  {name} {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    parser.add_argument("--profile", action="store_true", help="list the append path's hot spots")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="log-bench-") as tmp:
        root = Path(tmp)
        os.sync()  # start each stage without the previous one's dirty pages
        raw = raw_append_mb_s(root / "raw.bin", args.seconds)
        print(f"raw disk append (1 MiB write()):    {raw:7.0f} MB/s")

        request = produce_request()
        with StateStore(root / "state") as store:
            log = PartitionLog.open(root / "log", LogConfig(), store, "bench-0")
            os.sync()
            calls, elapsed = _append_for(log, request, args.seconds)
            rate = calls * len(request) / MB / elapsed
            print(
                f"PartitionLog.append_as_leader:      {rate:7.0f} MB/s"
                f"  ({elapsed / calls * 1e6:.0f} us per {len(request) / MB:.2f} MB request)"
            )
            total, read_s = _read_all(log)
            print(f"PartitionLog.read (1 MiB fetches):  {total / MB / read_s:7.0f} MB/s")
            _profile(log, request, 200, 10 if args.profile else 0)
            log.close()


if __name__ == "__main__":
    main()
