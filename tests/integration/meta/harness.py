"""Run real meta node processes (``python -m meta.node``) and observe them through MetaClient."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from common.internal_security import InternalSecurity
from meta.client import MetaClient
from proto import meta_pb2

REPO_ROOT = Path(__file__).resolve().parents[3]


def free_ports(count: int) -> list[int]:
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


class MetaNodes:
    """A quorum of meta node processes on free local ports, each with its own data dir, sharing
    a fresh internal.secret (a quorum needs one) unless ``secure`` is False."""

    def __init__(self, root: Path, size: int, secure: bool = True, **settings: object) -> None:
        ports = free_ports(2 * size)
        self.ids = list(range(1, size + 1))
        self._grpc = {i: f"127.0.0.1:{ports[i - 1]}" for i in self.ids}
        self._raft = {i: f"127.0.0.1:{ports[size + i - 1]}" for i in self.ids}
        self._root = root
        self._settings = {key.replace("_", "."): str(value) for key, value in settings.items()}
        self.security = InternalSecurity()
        if secure:
            self._settings["internal.secret"] = secrets.token_hex(32)
            self.security = InternalSecurity.from_properties(self._settings)
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self.bootstrap_ids = list(self.ids)  # meta.quorum.voters: the quorum it starts with

    def add_node(self, node_id: int) -> None:
        """Ports and a data dir for a meta node that joins the quorum (meta.raft.listener set,
        not among meta.quorum.voters); start it with `start`, add it with AddVoter."""
        grpc_port, raft_port = free_ports(2)
        self.ids.append(node_id)
        self._grpc[node_id] = f"127.0.0.1:{grpc_port}"
        self._raft[node_id] = f"127.0.0.1:{raft_port}"

    def data_dir(self, node_id: int) -> Path:
        return self._root / f"meta-{node_id}"

    def address(self, node_id: int) -> str:
        return self._grpc[node_id]

    @property
    def addresses(self) -> list[str]:
        return [self._grpc[i] for i in self.ids]

    def raft_address(self, node_id: int) -> str:
        return self._raft[node_id]

    def client(self, addresses: Sequence[str] | None = None, **options: Any) -> MetaClient:
        """A MetaClient of these nodes (or of ``addresses``), with their credentials."""
        return MetaClient(
            self.addresses if addresses is None else addresses, security=self.security, **options
        )

    def pid(self, node_id: int) -> int:
        return self._procs[node_id].pid

    def log_file(self, node_id: int) -> Path:
        return self._root / f"meta-{node_id}.log"

    def start(self, node_id: int) -> None:
        voters = ",".join(f"{i}@{self._raft[i]}" for i in self.bootstrap_ids)
        settings = {
            "node.id": node_id,
            "meta.listener": self._grpc[node_id],
            "meta.quorum.voters": voters,
            "meta.quorum.listeners": ",".join(f"{i}@{a}" for i, a in self._grpc.items()),
            "meta.data.dir": self.data_dir(node_id),
        } | self._settings
        if node_id not in self.bootstrap_ids:
            settings["meta.raft.listener"] = self._raft[node_id]
        command = [sys.executable, "-m", "meta.node"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        with self.log_file(node_id).open("ab") as log:
            self._procs[node_id] = subprocess.Popen(
                command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                env=os.environ | {"PYTHONUNBUFFERED": "1"},
            )  # fmt: skip

    def start_all(self) -> None:
        for node_id in self.ids:
            self.start(node_id)

    def kill(self, node_id: int) -> None:
        """kill -9, as a crash would."""
        proc = self._procs.pop(node_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self, node_id: int) -> None:
        """SIGTERM, and check the node shut down cleanly."""
        proc = self._procs.pop(node_id)
        proc.terminate()
        assert proc.wait(15) == 0, self.log_tail(node_id)

    def other_thread_ids(self, node_id: int) -> list[int]:
        """The Linux thread ids of the node's process but its main thread."""
        pid = self._procs[node_id].pid
        return [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()
                if int(task.name) != pid]  # fmt: skip

    def wait_exit(self, node_id: int, timeout: float) -> int:
        """Wait for the node to exit by itself; return its exit status."""
        return self._procs.pop(node_id).wait(timeout)

    def stop_all(self) -> None:
        for node_id in list(self._procs):
            self.stop(node_id)

    def kill_all(self) -> None:
        for node_id in list(self._procs):
            self.kill(node_id)

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        text = self.log_file(node_id).read_text(errors="replace").splitlines()
        return f"--- meta-{node_id} log ---\n" + "\n".join(text[-lines:])


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], timeout: float = 15.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = check()
        if not isinstance(outcome, bool):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def leader_id(client: MetaClient, exclude: int | None = None) -> int:
    """Wait until a node other than ``exclude`` is the Raft leader and knows the cluster id."""
    found = -1

    async def elected() -> bool:
        nonlocal found
        cluster = await client.describe_cluster()
        found = cluster.leader_id
        return found > 0 and found != exclude and bool(cluster.cluster_id)

    await eventually(elected, what="a Raft leader")
    return found


class WatchedMetadata:
    """Consumes a client's watch stream in the background into plain dicts tests can poll."""

    def __init__(self, client: MetaClient, from_offset: int = 0) -> None:
        self.events: list[meta_pb2.WatchEvent] = []
        self.cluster_id = ""
        self.topics: dict[str, meta_pb2.Topic] = {}
        self.brokers: dict[int, meta_pb2.Broker] = {}
        self._task = asyncio.create_task(self._consume(client, from_offset))

    async def _consume(self, client: MetaClient, from_offset: int) -> None:
        async for event in client.watch(from_offset):
            self.events.append(event)
            kind = event.WhichOneof("kind")
            if kind == "snapshot":
                self.cluster_id = event.snapshot.cluster_id
                self.topics = {t.name: t for t in event.snapshot.topics}
                self.brokers = {b.id: b for b in event.snapshot.brokers}
            elif kind == "topic":
                self.topics[event.topic.name] = event.topic
            elif kind == "topic_deleted":
                self.topics.pop(event.topic_deleted.name, None)
            elif kind == "broker":
                self.brokers[event.broker.id] = event.broker

    def assert_no_gap(self) -> None:
        """One snapshot first, then every offset exactly once: no change missed or repeated."""
        kinds = [event.WhichOneof("kind") for event in self.events]
        assert kinds[0] == "snapshot", kinds
        assert "snapshot" not in kinds[1:], kinds
        offsets = [event.offset for event in self.events]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), offsets

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def watching(client: MetaClient, from_offset: int = 0) -> AsyncIterator[WatchedMetadata]:
    watched = WatchedMetadata(client, from_offset)
    try:
        yield watched
    finally:
        await watched.close()


class FakeBrokers:
    """Brokers as the meta service sees them: they register, then heartbeat until stopped."""

    def __init__(self, client: MetaClient, heartbeat_interval_s: float) -> None:
        self._client = client
        self._interval = heartbeat_interval_s
        self.epochs: dict[int, int] = {}
        self._incarnations: dict[int, bytes] = {}
        self._heartbeats: dict[int, asyncio.Task[None]] = {}

    async def register(self, node_id: int, restarted: bool = False) -> int:
        """Register (again) with the same incarnation (a new one if ``restarted``) and (re)start
        heartbeating."""
        if restarted:
            self._incarnations[node_id] = uuid.uuid4().bytes
        incarnation = self._incarnations.setdefault(node_id, uuid.uuid4().bytes)
        self.epochs[node_id] = await self._client.register_broker(
            node_id,
            "127.0.0.1",
            9091 + node_id,
            replication_endpoint=f"127.0.0.1:{9390 + node_id}",
            incarnation_id=incarnation,
        )
        if node_id not in self._heartbeats:
            self._heartbeats[node_id] = asyncio.create_task(self._heartbeat(node_id))
        return self.epochs[node_id]

    async def _heartbeat(self, node_id: int) -> None:
        while True:
            await asyncio.sleep(self._interval)
            result = await self._client.heartbeat(node_id, self.epochs[node_id])
            if result.must_register:
                await self.register(node_id)

    async def controlled_shutdown(self, node_id: int) -> None:
        """Hand over the broker's leaderships, as a broker does before it stops; then stop."""
        result = await self._client.controlled_shutdown(node_id, self.epochs[node_id], timeout_s=10)
        assert result.may_exit, result
        assert result.error_code == 0, result
        await self.stop_heartbeats(node_id)

    async def take_into_isrs(self, topic: meta_pb2.Topic, node_id: int) -> None:
        """As the leaders do once the broker has caught up: add it back to every ISR of
        ``topic`` (as last seen) it is missing from."""
        for p in topic.partitions:
            if node_id in p.replicas and node_id not in p.isr:
                item = isr_change(topic.topic_id, p, [*p.isr, node_id])
                [result] = await self._client.alter_partition(
                    p.leader, self.epochs[p.leader], [item]
                )
                assert result.error_code == 0, result

    async def stop_heartbeats(self, node_id: int) -> None:
        task = self._heartbeats.pop(node_id)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def close(self) -> None:
        for node_id in list(self._heartbeats):
            await self.stop_heartbeats(node_id)


def isr_change(
    topic_id: bytes, partition: meta_pb2.Partition, new_isr: list[int]
) -> meta_pb2.AlterPartitionItem:
    """An AlterPartition item for ``partition`` as last seen (quoting its epochs)."""
    return meta_pb2.AlterPartitionItem(
        topic_id=topic_id,
        partition_index=partition.index,
        leader_epoch=partition.leader_epoch,
        partition_epoch=partition.partition_epoch,
        new_isr=new_isr,
    )
