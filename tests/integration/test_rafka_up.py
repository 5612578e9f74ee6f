"""`rafka up` starts a working cluster, says where it is, and stops everything on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from cluster.local import free_base_port


def test_up_serves_and_stops_cleanly(tmp_path: Path) -> None:
    base = free_base_port(1, 1)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cluster.cli",
            "up",
            "--brokers",
            "1",
            "--meta",
            "1",
            "--data-dir",
            str(tmp_path),
            "--base-port",
            str(base),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "Rafka is up" in line or not line:
                break
        assert f"bootstrap.servers=127.0.0.1:{base}" in "".join(lines), lines
        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{base}"}).list_topics(timeout=10)
        assert list(metadata.brokers) == [1]
        assert (tmp_path / "logs" / "broker-1.log").exists()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "stopped." in out
        log = (tmp_path / "logs" / "broker-1.log").read_text()
        assert "broker 1 stopped" in log
    finally:
        if proc.poll() is None:
            proc.kill()


def test_up_rejects_two_meta_nodes(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "up", "--meta", "2", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    assert "--meta must be 1 or 3" in res.stdout + res.stderr
