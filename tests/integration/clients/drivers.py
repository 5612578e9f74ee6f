"""Shared pieces of the client-driver contract (see README.md in this folder).

- ``record(i, start_ts)``: the deterministic record every driver's ``produce`` sends, so a
  test can check what any driver's ``consume`` prints against it.
- ``DRIVERS`` / ``run_driver``: how to launch each non-Python driver, for one pytest
  parametrization over all of them. Call ``setup.sh`` first (``ensure_setup()``).
- ``Running``: a driver command in the background with its stdin open (``--hold``,
  ``--stop-on-eof``), its JSON lines read as they come.

Only the standard library is used: kcat_driver.py imports this file too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Where setup.sh builds and downloads (the Go driver's binary among them).
CACHE = Path(os.environ.get("RAFKA_CLIENTS_CACHE") or HERE.parents[2] / ".cache" / "clients")
GO_DRIVER = CACHE / "go" / "rafka-go-driver"

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
    "franz-go": [str(GO_DRIVER), "franz"],
    "sarama": [str(GO_DRIVER), "sarama"],
}
# The drivers that are python_driver.py: a hung one dumps its threads' stacks on SIGQUIT.
PYTHON_DRIVERS = frozenset(
    d for d, argv in DRIVERS.items() if argv[1:2] == [str(HERE / "python_driver.py")]
)
# Run as the drivers are (run_driver, Running) but not drivers of the contract, so not in the
# client matrix: the Kafka Streams test application (streams/StreamsApp.java).
APPS: dict[str, list[str]] = {"streams": ["bash", str(HERE / "streams-app.sh")]}
_COMMANDS = DRIVERS | APPS


def ensure_setup() -> None:
    """Run setup.sh (idempotent; a few hundred ms when everything is cached)."""
    proc = subprocess.run(["bash", str(HERE / "setup.sh")], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"clients/setup.sh failed:\n{proc.stdout}{proc.stderr}")


def java_command(version: str) -> tuple[str, ...]:
    """The set-up Java driver's argv prefix (e.g. a verify workload's ``java_command``)."""
    if f"java-{version}" not in DRIVERS:
        raise ValueError(f"no Java driver {version}")
    ensure_setup()
    return tuple(DRIVERS[f"java-{version}"])


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
        [*_COMMANDS[driver], *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        env=os.environ | (env or {}),
    )
    # split("\n"), not splitlines(): the latter also splits on U+0085 and friends.
    lines = [json.loads(line) for line in proc.stdout.split("\n") if line.strip()]
    return Result(proc.returncode, lines, proc.stderr)


class Running:
    """A driver command in the background with stdin open: its JSON lines as they come, waits
    on them with a deadline (no sleeping), ``tell`` a line, ``finish`` = close stdin and wait,
    ``kill`` = kill -9 (e.g. ``txn-produce --hold true``: look while a transaction is open)."""

    def __init__(self, driver: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.argv = [*_COMMANDS[driver], *args]
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            env=os.environ | (env or {}),
        )
        self._lines: list = []
        self._eof = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                with self._cond:
                    self._lines.append(json.loads(line))
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    @property
    def lines(self) -> list:
        with self._cond:
            return list(self._lines)

    def stderr(self) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()

    def wait_line(self, match: Callable[[dict], bool], timeout: float, what: str) -> dict:
        """The first line ``match`` accepts, waiting for it up to ``timeout`` seconds; fails
        at the deadline or when the command has ended without printing it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self._lines:
                    if isinstance(line, dict) and match(line):
                        return line
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    break
                self._cond.wait(left)
        state = "ended" if self._eof else f"timed out after {timeout:g}s"
        raise AssertionError(
            f"{what}: {state}; lines {self.lines[-5:]}; stderr: {self.stderr()[-3000:]}"
        )

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 120) -> Result:
        """Close stdin, wait for the exit, and return what it printed."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._reader.join(timeout)
        return Result(rc, self.lines, self.stderr())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
