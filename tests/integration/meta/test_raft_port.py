"""A meta node's Raft port admits only its peers (meta/raft_port.py), on real meta nodes: a frame
announcing 2 GiB is refused at its length, without the node buffering it; a pickle that would
run code never runs, whether sent in clear, encrypted with a wrong password or with the
cluster's own (only Raft data is ever unpickled); and the quorum goes on serving through every
node. A quorum without internal.secret does not start (test_node_startup.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from .harness import MetaNodes, leader_id
from .raft_attacks import announce_oversized_frame, code_running_frame, rss_bytes, send_frame

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
