"""A meta node that cannot start says why and what to do, and exits with status 1."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import REPO_ROOT, free_ports


def run_node(tmp_path: Path, grpc_port: int, raft_port: int, data_dir: Path) -> tuple[int, str]:
    overrides = {
        "meta.listener": f"127.0.0.1:{grpc_port}",
        "meta.quorum.voters": f"1@127.0.0.1:{raft_port}",
        "meta.data.dir": data_dir,
    }
    command = [sys.executable, "-m", "meta.node"]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    return done.returncode, done.stderr


@pytest.mark.parametrize("taken", ["grpc", "raft"])
def test_port_in_use(tmp_path: Path, taken: str) -> None:
    grpc_port, raft_port = free_ports(2)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", grpc_port if taken == "grpc" else raft_port))
        holder.listen()
        status, log = run_node(tmp_path, grpc_port, raft_port, tmp_path / "data")
    assert status == 1
    setting = "meta.listener" if taken == "grpc" else "meta.quorum.voters"
    assert "port is in use" in log and setting in log, log


def test_data_dir_not_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    status, log = run_node(tmp_path, *free_ports(2), data_dir=blocker / "meta")
    assert status == 1
    assert "meta.data.dir" in log and "not writable" in log, log
