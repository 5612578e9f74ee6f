#!/usr/bin/env python3
"""kcat driver: every Kafka request is made by the kcat binary (1.7.1, librdkafka 2.0.2);
this wrapper only builds its input and command line and turns its output into the JSON of
the shared contract (README.md). Standard library only.

kcat limits (also in README.md):
- create-topic: kcat has no admin API -> exit 3 (unsupported).
- produce: `-H` headers apply to every message of a run and there is no per-message
  timestamp option, so kcat records carry the fixed headers KCAT_HEADERS, the broker/client
  time as timestamp (printed as null), and --start-ts is ignored.
- produce: kcat's delivery reports (-v -v) give partition and offset but not the key. Keys
  are matched to reports through librdkafka's default partitioner (consistent_random:
  crc32(key) % partitions, the same as zlib.crc32) and per-partition delivery order, and the
  per-partition counts are checked against the reports.
- security ($RAFKA_CLIENT_SECURITY, README.md "Security"): librdkafka's `-X` settings. No
  OAUTHBEARER with a given token (kcat has no token callback, this librdkafka no OIDC) and no
  delegation tokens (no SCRAM tokenauth): exit 3. SCRAM fails against brokers that check the
  nonce as RFC 5802 says (librdkafka < 2.6.1 repeats its own nonce).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import zlib
from collections import defaultdict, deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drivers import EXIT_FAILED, EXIT_UNSUPPORTED, record

KCAT = os.environ.get("KCAT", "kcat")
# Fixed headers of every kcat-produced record (argv can't carry a NUL byte, so no 0x00).
KCAT_HEADERS = [("h1", b"v-kcat"), ("h2", b"\xff\xfe")]
TSTYPE = {"create": "CreateTime", "logappend": "LogAppendTime"}
DELIVERED = re.compile(rb"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")


# librdkafka's texts of the broker errors tests look for -> Kafka's error names.
ERRORS = [
    ("SASL authentication error", "SASL_AUTHENTICATION_FAILED"),
    ("Topic authorization failed", "TOPIC_AUTHORIZATION_FAILED"),
    ("Group authorization failed", "GROUP_AUTHORIZATION_FAILED"),
    ("Cluster authorization failed", "CLUSTER_AUTHORIZATION_FAILED"),
]


def fail(msg: str) -> None:
    """Exit 1; when librdkafka's text names a Kafka error, the contract's error line too."""
    print(f"kcat_driver: {msg}", file=sys.stderr)
    name = next((name for text, name in ERRORS if text in msg), None)
    if name:
        print(json.dumps({"error": name, "message": msg}))
    sys.exit(EXIT_FAILED)


@functools.cache
def security_args() -> list[str]:
    """-X settings for $RAFKA_CLIENT_SECURITY."""
    raw = os.environ.get("RAFKA_CLIENT_SECURITY", "").strip()
    sec = json.loads(raw) if raw else {}
    conf = {"security.protocol": sec.get("protocol", "PLAINTEXT")}
    if sec.get("ca"):
        conf["ssl.ca.location"] = sec["ca"]
    if sec.get("cert"):
        conf["ssl.certificate.location"] = sec["cert"]
        conf["ssl.key.location"] = sec["key"]
    if sec.get("tokenauth"):
        print("kcat_driver: librdkafka has no delegation tokens", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    if sec.get("mechanism") == "OAUTHBEARER":
        # No token callback in kcat, and this librdkafka has no OIDC (built without libcurl);
        # its unsecured JWT builder makes unsigned tokens, which a JWKS refuses.
        print("kcat_driver: kcat cannot send a given OAUTHBEARER token", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    if sec.get("mechanism"):
        conf |= {"sasl.mechanism": sec["mechanism"], "sasl.username": sec["username"]}
        conf["sasl.password"] = sec["password"]
    return [x for k, v in conf.items() for x in ("-X", f"{k}={v}")]


def kcat(args: list, timeout: float, **kw) -> subprocess.CompletedProcess:
    # RAFKA_CLIENT_LOG=DEBUG: librdkafka protocol/message debug, echoed to our stderr.
    debug = os.environ.get("RAFKA_CLIENT_LOG", "").upper() == "DEBUG"
    extra = ["-d", "broker,protocol,msg,security"] if debug else []
    extra += security_args()
    proc = subprocess.run([KCAT, *extra, *args], capture_output=True, timeout=timeout, **kw)
    if debug:
        sys.stderr.buffer.write(proc.stderr)
    return proc


def partitions(bootstrap: str, topic: str, timeout: float) -> list[int]:
    # -L runs a producer handle, which would ask the broker to auto-create the topic.
    args = ["-L", "-J", "-b", bootstrap, "-t", topic, "-m", str(int(timeout))]
    proc = kcat([*args, "-X", "allow.auto.create.topics=false"], timeout + 5)
    if proc.returncode:
        fail(f"metadata failed: {proc.stderr.decode(errors='replace').strip()}")
    (meta,) = [t for t in json.loads(proc.stdout)["topics"] if t["topic"] == topic]
    if meta.get("error") or not meta["partitions"]:
        fail(f"topic {topic}: {meta.get('error', 'no partitions')}")
    return sorted(p["partition"] for p in meta["partitions"])


def produce(a: argparse.Namespace) -> int:
    if a.start_ts is not None:
        print("kcat_driver: kcat cannot set timestamps; --start-ts ignored", file=sys.stderr)
    nparts = len(partitions(a.bootstrap, a.topic, a.timeout))
    keys = [record(i, 0).key for i in range(a.count)]
    stdin = b"".join(k + b"\t" + record(i, 0).value + b"\n" for i, k in enumerate(keys))
    args = ["-P", "-b", a.bootstrap, "-t", a.topic, "-K", "\t", "-D", "\n"]
    args += [b"-H" + name.encode() + b"=" + value for name, value in KCAT_HEADERS]
    args += ["-X", f"compression.codec={a.compression}", "-X", f"acks={a.acks}"]
    args += ["-X", f"message.timeout.ms={int(a.timeout * 1000)}", "-v", "-v"]  # -v -v: reports
    proc = kcat(args, a.timeout + 10, input=stdin)
    reports = [(int(p), int(o)) for p, o in DELIVERED.findall(proc.stderr)]
    if proc.returncode or len(reports) != a.count:
        fail(
            f"kcat exited {proc.returncode} with {len(reports)}/{a.count} delivery reports:\n"
            + proc.stderr.decode(errors="replace")
        )

    expected: defaultdict[int, deque[bytes]] = defaultdict(deque)  # partition -> keys, in order
    for k in keys:
        expected[zlib.crc32(k) % nparts].append(k)
    counts: defaultdict[int, int] = defaultdict(int)
    for p, _ in reports:
        counts[p] += 1
    if counts != {p: len(q) for p, q in expected.items()}:
        fail(f"delivery reports per partition {dict(counts)} don't match crc32 partitioning")
    for p, offset in reports:
        key = expected[p].popleft().decode()
        # acks=0: librdkafka reports no offset (-1001); print -1 as the other drivers do.
        print(
            json.dumps({"key": key, "partition": p, "offset": max(offset, -1), "timestamp": None})
        )
    return 0


def consume(a: argparse.Namespace) -> int:
    # No -G: kcat's simple consumer assigns every partition of the topic itself. No -e (it
    # would stop at the first end of partitions); -c stops at N and the timeout kills it.
    # -u: unbuffered, so lines printed before a timeout are not lost.
    args = ["-C", "-b", a.bootstrap, "-t", a.topic, "-o", "beginning", "-c", str(a.expect)]
    args += ["-J", "-u", "-q"]
    try:
        proc = kcat(args, a.timeout)
        out, err, timed_out = proc.stdout, proc.stderr, False
        if proc.returncode:
            fail(f"kcat exited {proc.returncode}: {err.decode(errors='replace').strip()}")
    except subprocess.TimeoutExpired as e:
        out, err, timed_out = e.stdout or b"", e.stderr or b"", True
    seen = 0
    for line in out.splitlines():
        if not line.strip():
            continue
        # kcat -J copies key/value/header bytes into JSON strings verbatim (escaping only
        # quotes, backslashes and control characters), so latin-1 maps each byte to one
        # character: exactly this contract's encoding.
        m = json.loads(line.decode("latin-1"))
        h = m.get("headers", [])
        print(
            json.dumps(
                {
                    "partition": m["partition"],
                    "offset": m["offset"],
                    "key": m["key"],
                    "value": m["payload"],
                    "headers": [[h[i], h[i + 1]] for i in range(0, len(h), 2)],
                    "timestamp": m.get("ts", -1),
                    "timestamp_type": TSTYPE.get(m.get("tstype"), "NoTimestampType"),
                }
            )
        )
        seen += 1
    if timed_out or seen < a.expect:
        fail(
            f"consume: timed out with {seen} of {a.expect} records "
            f"{err.decode(errors='replace').strip()}"
        )
    return 0


def offsets_for_times(a: argparse.Namespace) -> int:
    args = ["-Q", "-J", "-b", a.bootstrap, "-m", str(int(a.timeout))]
    for p in partitions(a.bootstrap, a.topic, a.timeout):
        args += ["-t", f"{a.topic}:{p}:{a.timestamp}"]
    proc = kcat(args, a.timeout + 5)
    if proc.returncode:
        fail(f"kcat -Q failed: {proc.stderr.decode(errors='replace').strip()}")
    res = json.loads(proc.stdout)[a.topic]
    out = {}
    for k, v in res.items():
        if k == "topic":
            continue
        if v.get("error"):
            fail(f"partition {k}: {v['error']}")
        out[str(v["partition"])] = v["offset"]  # -1: no record at or after the timestamp
    print(json.dumps(dict(sorted(out.items(), key=lambda kv: int(kv[0])))))
    return 0


def create_topic(a: argparse.Namespace) -> int:
    print(
        "kcat_driver: kcat has no admin API; create the topic with another client", file=sys.stderr
    )
    return EXIT_UNSUPPORTED


def main() -> int:
    ap = argparse.ArgumentParser(prog="kcat_driver.py")
    sub = ap.add_subparsers(dest="command", required=True)

    def command(name, fn, timeout):
        p = sub.add_parser(name)
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--timeout", type=float, default=timeout)
        p.set_defaults(fn=fn)
        return p

    p = command("create-topic", create_topic, 60)
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--replication-factor", type=int)
    p = command("produce", produce, 60)
    p.add_argument("--count", type=int, required=True)
    p.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    p.add_argument("--acks", default="-1", choices=["-1", "0", "1"])
    p.add_argument("--start-ts", type=int)
    p = command("consume", consume, 30)
    p.add_argument("--expect", type=int, required=True)
    p = command("offsets-for-times", offsets_for_times, 60)
    p.add_argument("--timestamp", type=int, required=True)

    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
