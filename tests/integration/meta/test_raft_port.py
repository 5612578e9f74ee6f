"""A meta node's Raft port admits only its peers (meta/raft_port.py), on real meta nodes: a frame
announcing 2 GiB is refused at its length, without the node buffering it; a pickle that would
run code never runs, whether sent in clear, encrypted with a wrong password or with the
cluster's own (only Raft data is ever unpickled); a flood of connections, and running out of
descriptors, never close the port; and the quorum goes on serving through every node. A quorum
without internal.secret does not start (test_node_startup.py)."""

from __future__ import annotations

import asyncio
import os
import resource
from pathlib import Path

import pytest

from meta.client import MetaClient, MetaError

from .harness import MetaNodes, eventually, leader_id
from .raft_attacks import (
    announce_oversized_frame,
    closed_by_peer,
    code_running_frame,
    open_connections,
    rss_bytes,
    send_frame,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

# What a refused frame may cost a node at most: pysyncobj's read size, a kernel socket buffer,
# and the noise of a running process. A node that buffered the frame grows by its size.
_MEMORY_SLACK = 32 << 20


@pytest.mark.parametrize(
    ("size", "secure"), [(3, True), (1, False)], ids=["quorum-with-secret", "one-node-no-secret"]
)
async def test_hostile_frames_are_refused_and_the_quorum_serves(
    meta_nodes_factory, tmp_path: Path, size: int, secure: bool
) -> None:
    nodes: MetaNodes = meta_nodes_factory(size, secure=secure)
    nodes.start_all()
    passwords = [None, "not-the-cluster-password"]
    if secure:  # a member gone rogue: authenticated, still only Raft data is unpickled
        passwords.append(nodes.security.raft_password)
    async with nodes.client() as client:
        await leader_id(client)
        for node in nodes.ids:
            raft = nodes.raft_address(node)
            before = rss_bytes(nodes.pid(node))
            sent = await asyncio.to_thread(announce_oversized_frame, raft)
            assert sent < _MEMORY_SLACK, nodes.log_tail(node)
            assert rss_bytes(nodes.pid(node)) - before < _MEMORY_SLACK
            for i, password in enumerate(passwords):
                marker = tmp_path / f"ran-on-{node}-{i}"
                frame = code_running_frame(marker, password)
                assert await asyncio.to_thread(send_frame, raft, frame), f"password {i}"
                assert not marker.exists(), f"the pickle ran on meta node {node} (password {i})"
            assert (
                "Raft port: dropped the connection of 127.0.0.1:"
                in nodes.log_file(node).read_text()
            )
        for node in nodes.ids:  # every node still serves writes, hence is in the quorum
            async with nodes.client([nodes.address(node)]) as through:
                assert await through.register_groups([(f"group-{node}", 0)]) == 1
    nodes.stop_all()


async def test_a_connection_flood_and_no_descriptors_leave_the_raft_port_listening(
    meta_nodes_factory,
) -> None:
    """The node every peer dials (pysyncobj: the higher address dials) is flooded with silent
    connections: most are closed at once (a few per peer are held), the rest once their time
    to prove the Raft password is out, and the quorum commits through it meanwhile. Then,
    out of descriptors (its open-files limit lowered under what it holds), it cannot accept:
    it goes on listening, and once descriptors are free a restarted peer rejoins it (the third
    node stopped: the two of them are the only majority)."""
    nodes: MetaNodes = meta_nodes_factory(3)
    nodes.start_all()
    target = min(nodes.ids, key=nodes.raft_address)
    restarted, stopped = (i for i in nodes.ids if i != target)
    raft, log_file = nodes.raft_address(target), nodes.log_file(target)
    async with nodes.client() as client:
        await leader_id(client)
    flood = await asyncio.to_thread(open_connections, raft, 300)
    try:
        async with nodes.client([nodes.address(target)]) as through:
            assert await through.register_groups([("during-the-flood", 0)]) == 1
        await eventually(lambda: all(map(closed_by_peer, flood)), 60, "the flood closed")
    finally:
        for sock in flood:
            sock.close()
    text = log_file.read_text()
    assert "have not proved the cluster's Raft password yet, the most this node holds" in text
    assert "did not prove the cluster's Raft password within" in text

    pid = nodes.pid(target)
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{pid}/fd")), hard))
    try:
        pending = open_connections(raft, 3)
        await eventually(
            lambda: "Raft port: cannot accept connections" in log_file.read_text(),
            15,
            "a failed accept",
        )
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    await eventually(lambda: all(map(closed_by_peer, pending)), 20, "the pending ones served")
    for sock in pending:
        sock.close()
    assert "out of file descriptors: raise its open-files limit" in log_file.read_text()

    nodes.stop(stopped)
    nodes.kill(restarted)
    nodes.start(restarted)
    async with nodes.client([nodes.address(target)]) as through:
        await eventually(
            lambda: _writes(through, "after-the-flood"), 60, "a write through the target"
        )
    nodes.stop_all()


async def _writes(client: MetaClient, group: str) -> bool:
    """Whether a write through ``client`` commits (False: no Raft majority behind it yet)."""
    try:
        return await client.register_groups([(group, 0)]) == 1
    except MetaError:
        return False
