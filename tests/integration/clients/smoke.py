#!/usr/bin/env python3
"""Cross-client smoke matrix for the drivers in this folder (not a pytest module).

Every driver produces with every codec; every driver consumes what each produced and the
records are checked against drivers.record() and the producer's reported offsets; every
driver answers offsets-for-times on the uncompressed topics. Usage:

    bash tests/integration/clients/setup.sh
    python tests/integration/clients/smoke.py --bootstrap 127.0.0.1:9092 [--count 300]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections import Counter

from drivers import DRIVERS, EXIT_UNSUPPORTED, latin1, record, run_driver
from kcat_driver import KCAT_HEADERS

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def check_produced(res, producer: str, n: int, start_ts: int) -> list[str]:
    errs = []
    if res.returncode != 0:
        return [f"exit {res.returncode}: {res.stderr.strip()[-500:]}"]
    if sorted(r["key"] for r in res.lines) != sorted(f"key-{i}" for i in range(n)):
        errs.append(f"{len(res.lines)} delivery lines, keys don't match")
    by_part = Counter(r["partition"] for r in res.lines)
    for p, cnt in by_part.items():
        offsets = sorted(r["offset"] for r in res.lines if r["partition"] == p)
        if offsets != list(range(offsets[0], offsets[0] + cnt)):
            errs.append(f"partition {p}: offsets not contiguous")
    for r in res.lines:
        i = int(r["key"].split("-")[1])
        if producer != "kcat" and r["timestamp"] != start_ts + i:
            errs.append(f"{r['key']}: timestamp {r['timestamp']} != {start_ts + i}")
            break
    if len(by_part) < 2:
        errs.append(f"keyed records all went to {set(by_part)}")
    return errs


def check_consumed(res, producer: str, produced: dict, n: int, start_ts: int) -> list[str]:
    if res.returncode != 0:
        return [f"exit {res.returncode}: {res.stderr.strip()[-500:]}"]
    errs = []
    for r in res.lines:
        i = int(latin1(r["key"]).decode().split("-")[1])
        want = record(i, start_ts)
        headers = KCAT_HEADERS if producer == "kcat" else want.headers
        got_headers = [(k, latin1(v)) for k, v in r["headers"]]
        if latin1(r["value"]) != want.value or got_headers != headers:
            errs.append(f"key-{i}: value/headers differ: {r}")
        if (r["partition"], r["offset"]) != produced[f"key-{i}"]:
            errs.append(
                f"key-{i}: at {r['partition']}/{r['offset']}, producer said {produced[f'key-{i}']}"
            )
        if producer != "kcat" and r["timestamp"] != want.timestamp:
            errs.append(f"key-{i}: timestamp {r['timestamp']} != {want.timestamp}")
        if r["timestamp_type"] != "CreateTime":
            errs.append(f"key-{i}: timestamp_type {r['timestamp_type']}")
        if len(errs) > 3:
            break
    if len(res.lines) != n:
        errs.append(f"{len(res.lines)} records, expected {n}")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--drivers", default=",".join(DRIVERS))
    ap.add_argument("--codecs", default=",".join(CODECS))
    a = ap.parse_args()
    drivers = a.drivers.split(",")
    passed = failed = 0

    def report(name: str, errs: list[str], secs: float) -> None:
        nonlocal passed, failed
        status = "FAIL" if errs else "ok"
        passed, failed = passed + (not errs), failed + bool(errs)
        print(
            f"{status:4} {name} ({secs:.1f}s)" + "".join(f"\n       {e}" for e in errs[:4]),
            flush=True,
        )

    def timed(driver: str, *args: str):
        t = time.monotonic()
        res = run_driver(driver, *args, "--bootstrap", a.bootstrap)
        return res, time.monotonic() - t

    for producer in drivers:
        for codec in a.codecs.split(","):
            topic = f"smoke-{producer}-{codec}-{uuid.uuid4().hex[:6]}"
            create = ["create-topic", "--topic", topic, "--partitions", str(a.partitions)]
            res, secs = timed(producer, *create)
            if res.returncode == EXIT_UNSUPPORTED:  # kcat: no admin API
                res, secs = timed("java-4.3.0", *create)
            report(
                f"create-topic {topic} by {producer}",
                [] if res.returncode == 0 else [res.stderr.strip()[-300:]],
                secs,
            )
            start_ts = int(time.time() * 1000)
            res, secs = timed(
                producer,
                "produce",
                "--topic",
                topic,
                "--count",
                str(a.count),
                "--compression",
                codec,
                "--start-ts",
                str(start_ts),
            )
            errs = check_produced(res, producer, a.count, start_ts)
            report(f"produce  {producer:10} {codec:6}", errs, secs)
            if errs:
                continue
            produced = {r["key"]: (r["partition"], r["offset"]) for r in res.lines}
            consumed = None
            for consumer in drivers:
                res, secs = timed(
                    consumer,
                    "consume",
                    "--topic",
                    topic,
                    "--expect",
                    str(a.count),
                    "--timeout",
                    "30",
                )
                report(
                    f"consume  {producer:10} {codec:6} by {consumer}",
                    check_consumed(res, producer, produced, a.count, start_ts),
                    secs,
                )
                consumed = consumed or (res.lines if res.returncode == 0 else None)
            if codec != "none" or not consumed:
                continue
            # offsets-for-times: expectation from the consumed records' timestamps.
            t = sorted(r["timestamp"] for r in consumed)[len(consumed) // 2]
            for ts in (t, t + 10**7):
                want = {}
                for p in range(a.partitions):
                    offs = [
                        r["offset"]
                        for r in consumed
                        if r["partition"] == p and r["timestamp"] >= ts
                    ]
                    want[str(p)] = min(offs) if offs else -1
                for q in drivers:
                    res, secs = timed(
                        q, "offsets-for-times", "--topic", topic, "--timestamp", str(ts)
                    )
                    got = res.lines[0] if res.returncode == 0 and res.lines else res.stderr
                    report(
                        f"offsets-for-times {producer:10} ts={ts} by {q}",
                        [] if got == want else [f"got {got}, want {want}"],
                        secs,
                    )
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
