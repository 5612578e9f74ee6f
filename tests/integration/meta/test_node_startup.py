"""A meta node that cannot start says why and what to do, and exits with status 1; a running
one stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import REPO_ROOT, MetaNodes, free_ports, leader_id


def run_node(
    tmp_path: Path, grpc_port: int, raft_port: int, data_dir: Path, **more: str
) -> tuple[int, str]:
    overrides = {
        "meta.listener": f"127.0.0.1:{grpc_port}",
        "meta.quorum.voters": f"1@127.0.0.1:{raft_port}",
        "meta.data.dir": data_dir,
    } | {key.replace("_", "."): value for key, value in more.items()}
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
    assert "port is in use" in log, log
    assert setting in log, log


def test_data_dir_not_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    grpc_port, raft_port = free_ports(2)
    status, log = run_node(tmp_path, grpc_port, raft_port, blocker / "meta")
    assert status == 1
    assert "meta.data.dir" in log, log
    assert "not writable" in log, log


def test_a_quorum_without_a_secret_does_not_start(tmp_path: Path) -> None:
    """Raft peers authenticate each other with internal.secret: without it, whoever reached a
    Raft port could send the node pickles (meta/raft_port.py)."""
    grpc_port, raft_port, other_grpc, other_raft = free_ports(4)
    status, log = run_node(
        tmp_path,
        grpc_port,
        raft_port,
        tmp_path / "data",
        meta_quorum_voters=f"1@127.0.0.1:{raft_port},2@127.0.0.1:{other_raft}",
        meta_quorum_listeners=f"1@127.0.0.1:{grpc_port},2@127.0.0.1:{other_grpc}",
    )
    assert status == 1
    assert "names 2 meta nodes but internal.secret is not set" in log, log


def test_a_damaged_state_dump_stops_the_node(tmp_path: Path) -> None:
    """pysyncobj would log it and serve the metadata without what the dump held."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    dump = data_dir / "state.dump"
    dump.write_bytes(b"\x1f\x8b not what pysyncobj wrote")
    grpc_port, raft_port = free_ports(2)
    status, log = run_node(tmp_path, grpc_port, raft_port, data_dir)
    assert status == 1
    assert f"the metadata state dump {dump} cannot be loaded" in log, log
    assert "restore the data dir from a backup, or, if the other meta nodes are up" in log


@pytest.mark.anyio
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
async def test_sigterm_taken_by_any_thread_stops_the_node(meta_nodes_factory) -> None:
    """The kernel may hand a process's SIGTERM to any of its threads (kill(2) of a thread id
    forces that); the node must still stop, not sleep through it in its main thread."""
    nodes: MetaNodes = meta_nodes_factory(1)
    nodes.start_all()
    async with nodes.client() as client:
        await leader_id(client)
    os.kill(nodes.other_thread_ids(1)[0], signal.SIGTERM)
    assert nodes.wait_exit(1, timeout=10) == 0, nodes.log_tail(1)
