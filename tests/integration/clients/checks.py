"""Checks of driver output against the reference records (drivers.record), shared by the
integration tests: what a producer reported, what a consumer read, what ListOffsets by time
must answer."""

from __future__ import annotations

from collections import Counter

from tests.expect import present
from tests.integration.clients.drivers import Result, latin1, record
from tests.integration.clients.kcat_driver import KCAT_HEADERS


def check_produced(res: Result, producer: str, n: int, start_ts: int) -> list[str]:
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


def check_consumed(res: Result, producer: str, produced: dict, n: int, start_ts: int) -> list[str]:
    if res.returncode != 0:
        return [f"exit {res.returncode}: {res.stderr.strip()[-500:]}"]
    errs = []
    for r in res.lines:
        i = int(present(latin1(r["key"])).decode().split("-")[1])
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
        # null: the client does not tell (Sarama's ConsumerMessage has no timestamp type)
        if r["timestamp_type"] not in ("CreateTime", None):
            errs.append(f"key-{i}: timestamp_type {r['timestamp_type']}")
        if len(errs) > 3:
            break
    if len(res.lines) != n:
        errs.append(f"{len(res.lines)} records, expected {n}")
    return errs


def expected_offsets_for_times(consumed: list[dict], partitions: int, ts: int) -> dict[str, int]:
    """Per partition, the first offset whose timestamp is >= ts (-1: none), from what was read."""
    want = {}
    for p in range(partitions):
        offs = [r["offset"] for r in consumed if r["partition"] == p and r["timestamp"] >= ts]
        want[str(p)] = min(offs) if offs else -1
    return want
