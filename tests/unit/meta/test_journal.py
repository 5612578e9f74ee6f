"""The meta service's Raft storage is durable before it is acknowledged (meta.journal, meta.raft).

The sync is observed at the OS level: ``os.fdatasync``, ``os.fsync`` and ``os.replace`` are
wrapped (still called) to record what was synced, and in which order with the messages sent.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj.journal import FileJournal
from pysyncobj.tcp_connection import TcpConnection

from meta.commands import RegisterBroker
from meta.feed import ChangeFeed
from meta.journal import DurableJournal, open_journal, read_records
from meta.raft import MetaRaft
from tests.integration.conftest import wait_for
from tests.integration.meta.harness import free_ports

PASSWORD = "a password the members share"


class OsEvents:
    """Records, in order, syncs (with the path and the file size they made durable), renames
    and Raft messages sent, from every thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()
        for name in ("fdatasync", "fsync"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._sync_recorder(name, real))
        real_replace = os.replace

        def replace(src: Any, dst: Any) -> None:
            real_replace(src, dst)
            self._add(("replace", Path(src), Path(dst)))

        monkeypatch.setattr(os, "replace", replace)
        real_send = TcpConnection.send

        def send(connection: TcpConnection, message: Any) -> None:
            self._add(("send", message))
            real_send(connection, message)

        monkeypatch.setattr(TcpConnection, "send", send)

    def _sync_recorder(self, name: str, real: Any) -> Any:
        def sync(fd: int) -> None:
            real(fd)
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            self._add((name, path, os.fstat(fd).st_size))

        return sync

    def _add(self, event: tuple[Any, ...]) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: str) -> Iterator[tuple[int, tuple[Any, ...]]]:
        return ((i, e) for i, e in enumerate(list(self.events)) if e[0] == kind)


@pytest.fixture
def os_events(monkeypatch: pytest.MonkeyPatch) -> OsEvents:
    return OsEvents(monkeypatch)


@contextlib.contextmanager
def two_members(root: Path) -> Iterator[list[MetaRaft]]:
    """Two real Raft members, data dirs ``root/0`` and ``root/1``, once one of them leads;
    destroyed on the way out."""
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    rafts = []
    try:
        for i, address in enumerate(addresses):
            (root / str(i)).mkdir(parents=True)
            peers = [other for other in addresses if other != address]
            rafts.append(
                MetaRaft(address, peers, root / str(i), ChangeFeed(100), 10, lambda: None, PASSWORD)
            )
        wait_for(lambda: any(r.is_leader() for r in rafts), 15, "a Raft leader")
        yield rafts
    finally:
        for raft in rafts:
            raft.destroy()


def test_raft_entries_and_acks_go_out_only_once_synced(tmp_path: Path, os_events: OsEvents):
    """Two real Raft members: every AppendEntries the leader sends, and every acknowledgement
    the follower sends, follows an fdatasync of the sender's log that covered those entries."""
    with two_members(tmp_path) as rafts:
        leader = next(i for i, r in enumerate(rafts) if r.is_leader())
        for n in range(20):
            rafts[n % 2].submit(RegisterBroker(n, "h", 9092, None, "", b"incarnation", False))

    def synced_before(event_index: int, node: int, index: int) -> bool:
        """An fdatasync of ``node``'s log before the event covered its entry ``index``."""
        log = tmp_path / str(node) / "raft.log"
        end = next(e for _, e, entry in read_records(log.read_bytes()) if entry[1] == index)
        return any(
            i < event_index and path == log and size >= end
            for i, (_, path, size) in os_events.of("fdatasync")
        )

    appends = acks = 0
    for i, (_, message) in os_events.of("send"):
        if not isinstance(message, dict):  # the connection handshake
            continue
        if message["type"] == "append_entries" and message.get("entries"):
            appends += 1
            assert synced_before(i, leader, message["entries"][-1][1]), message
        elif message["type"] == "next_node_idx" and message["success"]:
            acks += 1
            assert synced_before(i, 1 - leader, message["next_node_idx"] - 1), message
    assert appends
    assert acks


def test_a_follower_never_deletes_entries_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two real Raft members under concurrent writes: pysyncobj's leader often sends again
    entries the follower has already acknowledged (an older acknowledgement moves its next index
    back), and pysyncobj's follower would delete them from disk and write them again, a window in
    which a crash loses its copy. With one leader throughout, no log is ever truncated (a run in
    which the leader changed, as a loaded machine may cause, proves nothing and is run again)."""
    truncated: list[Path] = []
    real_ftruncate = os.ftruncate

    def ftruncate(fd: int, length: int) -> None:
        truncated.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_ftruncate(fd, length)

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    for attempt in range(3):
        truncated.clear()
        if _concurrent_writes_under_one_leader(tmp_path / str(attempt)):
            break
    else:
        pytest.fail("the Raft leader changed in every attempt")
    assert not [path for path in truncated if path.name == "raft.log"], truncated


def _concurrent_writes_under_one_leader(root: Path) -> bool:
    """8 threads submit 15 commands each to two Raft members; False if the leader changed."""
    with two_members(root) as rafts:
        terms = [r.status()["raft_term"] for r in rafts]

        def writer(n: int) -> None:
            for k in range(15):
                broker = RegisterBroker(n * 100 + k, "h", 9092, None, "", b"i", False)
                rafts[k % 2].submit(broker)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [r.status()["raft_term"] for r in rafts] == terms


def test_acknowledgements_carry_their_term_and_stale_ones_are_dropped(
    tmp_path: Path, os_events: OsEvents
) -> None:
    """pysyncobj's acknowledgement has no term; DurableTransport stamps the sender's, and a
    leader drops one of an earlier term (it answered an earlier leadership)."""
    with two_members(tmp_path) as rafts:
        leader = next(r for r in rafts if r.is_leader())
        leader.submit(RegisterBroker(1, "h", 9092, None, "", b"i", False))
        term = leader.status()["raft_term"]
        transport = leader._sync._SyncObj__transport
        delivered: list[dict[str, Any]] = []
        transport._onMessageReceivedCallback = lambda node, message: delivered.append(message)
        ack = {"type": "next_node_idx", "next_node_idx": -7, "reset": False, "success": False}
        for sent_term in (term - 1, term, None):
            message = ack if sent_term is None else ack | {"term": sent_term}
            transport._onMessageReceived(None, message)
    injected = [m for m in delivered if m.get("next_node_idx") == -7]  # not the follower's own
    assert injected == [ack | {"term": term}, ack]  # the stale one dropped; no term: let through
    acks = [m for _, (_, m) in os_events.of("send") if isinstance(m, dict) and "next_node_idx" in m]
    assert acks, acks
    assert all(1 <= m["term"] <= term for m in acks), acks


def test_a_burst_of_appends_costs_one_sync(tmp_path: Path, os_events: OsEvents) -> None:
    journal = DurableJournal(tmp_path / "raft.log")
    for i in range(1, 101):
        journal.add(b"command %d" % i, i, 1)
    assert journal.sync()
    assert not journal.sync()
    assert [e[0] for e in os_events.events if e[0] == "fdatasync"] == ["fdatasync"]
    journal._destroy()
    assert [entry[1] for entry in DurableJournal(tmp_path / "raft.log")] == list(range(1, 101))


def test_term_and_vote_are_on_disk_before_set_current_term_returns(
    tmp_path: Path, os_events: OsEvents
) -> None:
    journal = DurableJournal(tmp_path / "raft.log")
    del os_events.events[:]
    journal.setCurrentTerm(7, "node-2")
    meta, tmp = tmp_path / "raft.log.meta", tmp_path / "raft.log.meta.tmp"
    assert [e[:2] for e in os_events.events] == [
        ("fsync", tmp),  # the new content
        ("replace", tmp),  # then renamed over the old
        ("fsync", tmp_path),  # then the rename made durable
    ]
    assert os_events.events[1][2] == meta
    reopened = DurableJournal(tmp_path / "raft.log")
    assert (reopened.getCurrentTerm(), reopened.getVotedForNodeId()) == (7, "node-2")


def test_a_torn_last_record_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "raft.log"
    journal = DurableJournal(path)
    journal.add(b"one", 1, 1)
    journal.add(b"two", 2, 1)
    journal._destroy()
    intact = path.stat().st_size
    with path.open("ab") as f:  # the start of a third record: power lost mid-write
        f.write(DurableJournal.__module__.encode()[:7])
    reopened = DurableJournal(path)
    assert list(reopened) == [(b"one", 1, 1), (b"two", 2, 1)]
    assert path.stat().st_size == intact
    reopened.add(b"three", 3, 2)
    reopened._destroy()
    assert [e[1] for e in DurableJournal(path)] == [1, 2, 3]


def test_truncation_and_compaction(tmp_path: Path) -> None:
    path = tmp_path / "raft.log"
    journal = DurableJournal(path)
    for i in range(1, 6):
        journal.add(b"c%d" % i, i, 1)
    journal.deleteEntriesFrom(3)  # a new leader overrides entries 4 and 5
    journal.add(b"c4'", 4, 2)
    journal.deleteEntriesTo(1)  # a dump covers entry 1
    journal._destroy()
    assert list(DurableJournal(path)) == [(b"c2", 2, 1), (b"c3", 3, 1), (b"c4'", 4, 2)]


def test_a_pysyncobj_journal_is_taken_over(tmp_path: Path) -> None:
    legacy = FileJournal(str(tmp_path / "raft.journal"))
    legacy.add(b"a", 1, 1)
    legacy.add(b"b", 2, 3)
    legacy.setCurrentTerm(3, "node-1")
    legacy._destroy()
    journal = open_journal(tmp_path / "raft.log")
    assert list(journal) == [(b"a", 1, 1), (b"b", 2, 3)]
    assert (journal.getCurrentTerm(), journal.getVotedForNodeId()) == (3, "node-1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raft.log", "raft.log.meta"]
