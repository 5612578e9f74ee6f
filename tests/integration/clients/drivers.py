"""Shared pieces of the client-driver contract (see README.md in this folder).

- ``record(i, start_ts)``: the deterministic record every driver's ``produce`` sends, so a
  test can check what any driver's ``consume`` prints against it.
- ``DRIVERS`` / ``run_driver``: how to launch each non-Python driver, for one pytest
  parametrization over all of them. Call ``setup.sh`` first (``ensure_setup()``).

Only the standard library is used: kcat_driver.py imports this file too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

FILLER = "abcdefghijklmnopqrstuvwxyz0123456789"

# Exit codes shared by all drivers.
EXIT_OK = 0
EXIT_FAILED = 1  # delivery error, timeout, broker/client error
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3  # the client cannot do this at all (e.g. kcat has no admin API)
EXIT_TOPIC_EXISTS = 4  # create-topic: the topic already exists


@dataclass(frozen=True)
class Record:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int


def record(i: int, start_ts: int) -> Record:
    """Record ``i`` as every driver produces it (kcat: see README, headers/timestamp differ)."""
    filler = "".join(FILLER[(i + j) % len(FILLER)] for j in range((i * 37) % 200))
    return Record(
        key=f"key-{i}".encode(),
        value=f"value-{i}-{filler}".encode(),
        headers=[("h1", f"v-{i}".encode()), ("h2", bytes([0x00, 0xFF, i % 256]))],
        timestamp=start_ts + i,
    )


def latin1(s: str | None) -> bytes | None:
    """Drivers print binary fields as latin-1 strings; this turns one back into bytes."""
    return None if s is None else s.encode("latin-1")


# argv prefix of each driver; the command and its options follow.
DRIVERS: dict[str, list[str]] = {
    "confluent": [sys.executable, str(HERE / "python_driver.py"), "confluent"],
    "kafka-python": [sys.executable, str(HERE / "python_driver.py"), "kafka-python"],
    "aiokafka": [sys.executable, str(HERE / "python_driver.py"), "aiokafka"],
    "java-4.3.0": ["bash", str(HERE / "java-driver.sh"), "4.3.0"],
    "java-3.9.1": ["bash", str(HERE / "java-driver.sh"), "3.9.1"],
    "kafkajs": ["node", str(HERE / "kafkajs-driver.js")],
    "kcat": [sys.executable, str(HERE / "kcat_driver.py")],
}


def ensure_setup() -> None:
    """Run setup.sh (idempotent; a few hundred ms when everything is cached)."""
    proc = subprocess.run(["bash", str(HERE / "setup.sh")], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"clients/setup.sh failed:\n{proc.stdout}{proc.stderr}")


@dataclass
class Result:
    returncode: int
    lines: list  # stdout parsed as JSON, one value per line
    stderr: str

    @property
    def error(self) -> str | None:
        """Kafka's error name of a failed run (README.md, "Security": the error line)."""
        last = self.lines[-1] if self.lines else None
        return last.get("error") if isinstance(last, dict) and "message" in last else None


def security_env(protocol: str = "PLAINTEXT", **settings: object) -> dict[str, str]:
    """$RAFKA_CLIENT_SECURITY for the drivers: ``security_env("SASL_SSL", mechanism="PLAIN",
    username="alice", password="...", ca="/path/ca.pem")`` (README.md, "Security")."""
    value = {"protocol": protocol} | {k: v for k, v in settings.items() if v is not None}
    return {"RAFKA_CLIENT_SECURITY": json.dumps(value)}


def run_driver(
    driver: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> Result:
    """Run ``driver`` with ``args`` (e.g. "produce", "--bootstrap", b, ...); ``env`` is added
    to the environment (e.g. ``security_env(...)``)."""
    proc = subprocess.run(
        [*DRIVERS[driver], *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        env=os.environ | (env or {}),
    )
    # split("\n"), not splitlines(): the latter also splits on U+0085 and friends.
    lines = [json.loads(line) for line in proc.stdout.split("\n") if line.strip()]
    return Result(proc.returncode, lines, proc.stderr)
