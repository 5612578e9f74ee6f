"""A power loss of every meta node loses no acknowledged metadata.

Each meta node keeps its data dir on its own small ext4 file system in a loop-mounted image file.
Right after a burst of topic creations all three nodes are killed with SIGKILL, and then the
power is cut: each image is copied as it is at that moment, which holds only what the nodes
made durable (written data still in the page cache has not reached the loop device; a real power
loss drops it too). The nodes restart on the copies: every topic whose creation was
acknowledged must be there.

Needs root (mount). Skipped elsewhere, except under CI, where it must run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from meta.protocol import ErrorCode
from proto import meta_pb2

from .harness import FakeBrokers, MetaNodes, eventually, leader_id, watching

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

IMAGE_MB = 64


def _run(*command: str | Path) -> None:
    subprocess.run([str(c) for c in command], check=True, capture_output=True)


@contextlib.contextmanager
def on_disks(nodes: MetaNodes, images: dict[int, Path], root: Path) -> Iterator[None]:
    """Each node's data dir (root/meta-<id>) mounted from its image; on the way out the nodes
    still running are killed and the file systems unmounted."""
    mounts: list[Path] = []
    try:
        for node_id, image in images.items():
            mount = root / f"meta-{node_id}"
            mount.mkdir(exist_ok=True)
            _run("mount", "-o", "loop", image, mount)
            mounts.append(mount)
        yield
    finally:
        nodes.kill_all()
        for mount in mounts:
            _run("umount", mount)


@pytest.fixture
def loop_mounts() -> None:
    """Skip (fail under CI) where file systems cannot be loop-mounted."""
    missing = [tool for tool in ("mount", "umount", "mkfs.ext4") if shutil.which(tool) is None]
    reason = None
    if os.geteuid() != 0:
        reason = "needs root to loop-mount file systems"
    elif missing:
        reason = f"needs {', '.join(missing)}"
    if reason and os.environ.get("CI"):
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)


async def test_acknowledged_topics_survive_a_power_loss_of_every_meta_node(
    tmp_path: Path, loop_mounts: None, meta_nodes_factory
) -> None:
    nodes: MetaNodes = meta_nodes_factory(3, broker_session_timeout_ms=60_000)
    images = {i: tmp_path / f"meta-{i}.img" for i in nodes.ids}
    for image in images.values():
        with image.open("wb") as f:
            f.truncate(IMAGE_MB << 20)
        _run("mkfs.ext4", "-q", image)
    acknowledged: list[str] = []
    with on_disks(nodes, images, tmp_path):
        nodes.start_all()
        async with nodes.client() as client:
            await leader_id(client)
            brokers = FakeBrokers(client, heartbeat_interval_s=5)
            for broker_id in (1, 2, 3):
                await brokers.register(broker_id)

            async def create(name: str) -> None:
                topic = meta_pb2.CreatableTopic(name=name, num_partitions=3, replication_factor=3)
                [result] = await client.create_topics([topic])
                assert result.error_code == ErrorCode.NONE, result.error_message
                acknowledged.append(name)

            await asyncio.gather(*(create(f"burst-{n}") for n in range(40)))
            nodes.kill_all()
            await brokers.close()
        # The power cut: the disks as they are now, without what was never synced.
        after = {i: image.with_suffix(".after-power-loss") for i, image in images.items()}
        for node_id, image in images.items():
            shutil.copyfile(image, after[node_id])

    with on_disks(nodes, after, tmp_path):
        nodes.start_all()
        async with nodes.client() as client, watching(client) as restarted:
            await leader_id(client)

            def lost() -> set[str]:
                return set(acknowledged) - set(restarted.topics)

            with contextlib.suppress(AssertionError):  # the assert below says what is missing
                await eventually(lambda: not lost(), timeout=15, what="every acknowledged topic")
            assert not lost(), (
                f"{len(lost())} of {len(acknowledged)} acknowledged topics lost\n"
                + "\n".join(nodes.log_tail(node_id) for node_id in nodes.ids)
            )
        nodes.stop_all()
