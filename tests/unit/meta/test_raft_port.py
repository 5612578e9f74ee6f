"""What a meta node's Raft port and storage admit (meta/raft_port.py, meta/raft.py): pickles that
build anything but Raft data are refused before they run, Raft peers never run without a
password, a command too large for the port's frame bound is refused, and a state dump that
cannot be loaded, on disk or sent by the leader, stops the node instead of leaving it with an
empty, stale or mixed state.

(The port itself, on real meta nodes: tests/integration/meta/test_raft_port.py.)"""

from __future__ import annotations

import errno
import gzip
import logging
import os
import pickle
import zlib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pysyncobj.pickle
import pytest
from pysyncobj.node import TCPNode

import meta.journal
import meta.node
import meta.raft
from meta.commands import RegisterBroker, RegisterGroups
from meta.feed import ChangeFeed
from meta.journal import StateDumpError
from meta.model import Broker
from meta.node import MetaFailedError
from meta.protocol import ErrorCode
from meta.raft import CommandTooLargeError, MetaRaft, RaftPasswordError
from meta.raft_port import loads
from tests.integration.conftest import wait_for
from tests.integration.meta.harness import free_ports
from tests.integration.meta.raft_attacks import code_running_frame


def start(data_dir: Path, peers: list[str] | None = None) -> MetaRaft:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    return MetaRaft(address, peers or [], data_dir, ChangeFeed(100), 10, lambda: None)


class _Calls:
    """Unpickled, it calls ``function(*args)``."""

    def __init__(self, function: Callable[..., object], *args: object) -> None:
        self.reduced = (function, args)

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        return self.reduced


@pytest.mark.parametrize(
    "attack",
    [
        lambda marker: _Calls(open, str(marker), "w"),
        lambda marker: _Calls(os.system, f"touch {marker}"),
        lambda marker: _Calls(meta.journal.write_atomically, marker, b""),  # a meta function
        lambda marker: _Calls(meta.journal.DurableJournal, marker),  # a meta class, not data
    ],
    ids=["open", "os.system", "meta-function", "meta-class"],
)
def test_a_pickle_that_would_run_code_is_refused_before_it_runs(
    tmp_path: Path, attack: Callable[[Path], _Calls]
) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps(attack(marker), protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="Raft data may not name"):
        pysyncobj.pickle.loads(data)  # what pysyncobj calls: meta.raft installed the guard
    assert not marker.exists()


def test_a_frame_of_the_attack_helpers_runs_code_unless_guarded(tmp_path: Path) -> None:
    """The integration tests' frame is a real attack: plain pickle runs it."""
    marker = tmp_path / "ran"
    data = zlib.decompress(code_running_frame(marker)[4:])
    with pytest.raises(pickle.UnpicklingError):
        loads(data)
    assert not marker.exists()
    pickle.loads(data).close()
    assert marker.exists()


def test_raft_data_still_loads() -> None:
    """Messages, log entries and dumps: bytes (``_codecs.encode`` in protocol 2), sets of
    nodes, and the meta service's dataclasses and enums (commands of the pickled format)."""
    message = {
        "type": "append_entries",
        "term": 3,
        "entries": [(b"\x00\xff" * 10, 7, 3)],
        "prevLogIdx": 6,
        "prevLogTerm": 2,
    }
    broker = Broker(1, "h", 9092, None, "", b"i", 5)
    command = RegisterBroker(1, "h", 9092, None, "", b"i", False)
    value = (message, {TCPNode("127.0.0.1:9292")}, frozenset({1}), broker, command)
    loaded = loads(pickle.dumps(value, protocol=2))
    assert loaded[0] == message
    assert loaded[2:] == value[2:]
    assert [node.address for node in loaded[1]] == ["127.0.0.1:9292"]
    assert loads(pickle.dumps(ErrorCode.INELIGIBLE_REPLICA, protocol=2)) is (
        ErrorCode.INELIGIBLE_REPLICA
    )
    # b"" (a state dump's last chunk) is bytes() in protocol 2; bytes(n) would allocate n bytes
    assert loads(pickle.dumps((b"", False, True), protocol=2)) == (b"", False, True)
    with pytest.raises(pickle.UnpicklingError, match="bytes"):
        loads(pickle.dumps(_Calls(bytes, 1 << 40), protocol=2))


def test_peers_without_a_password_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RaftPasswordError, match="2 Raft voters need a shared password"):
        start(tmp_path, peers=["127.0.0.1:1"])


def test_a_command_over_the_entry_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raft = start(tmp_path)
    try:
        wait_for(raft.is_leader, 15, "leadership")
        monkeypatch.setattr(meta.raft, "MAX_ENTRY_BYTES", 200)
        with pytest.raises(CommandTooLargeError, match="RegisterGroups command is"):
            raft.submit(RegisterGroups(tuple((f"group-{i}", 0) for i in range(20))))
        assert raft.submit(RegisterGroups((("small", 0),))) == 1
    finally:
        raft.destroy()


def _write_a_dump(data_dir: Path) -> Path:
    raft = start(data_dir)
    try:
        wait_for(raft.is_leader, 15, "leadership")
        for i in range(3):
            raft.submit(RegisterGroups(((f"group-{i}", 0),)))
        raft._sync.forceLogCompaction()
        dump = data_dir / "state.dump"
        wait_for(dump.exists, 15, "a state dump")
    finally:
        raft.destroy()
    return dump


def _truncated(dump: Path) -> None:
    dump.write_bytes(dump.read_bytes()[:-20])


def _bad_record(dump: Path) -> None:
    data = pickle.loads(gzip.decompress(dump.read_bytes()))
    data[0][1] = b"\x0a\xff not a state record"
    dump.write_bytes(gzip.compress(pickle.dumps(data, protocol=2)))


@pytest.mark.parametrize("damage", [_truncated, _bad_record], ids=["torn", "bad-record"])
def test_a_damaged_state_dump_stops_the_node(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    dump = _write_a_dump(tmp_path)
    restarted = start(tmp_path)  # the dump as written loads
    try:
        wait_for(lambda: len(restarted.machine.state.groups) == 3, 15, "the dump and the log")
    finally:
        restarted.destroy()
    damage(dump)
    with pytest.raises(StateDumpError, match=f"the metadata state dump {dump} cannot be loaded"):
        start(tmp_path)


def _member(root: Path, addresses: list[str], i: int) -> MetaRaft:
    """Member ``i`` of a quorum of ``addresses``, its data in ``root/i``."""
    peers = [a for a in addresses if a != addresses[i]]
    (root / str(i)).mkdir(exist_ok=True)
    return MetaRaft(addresses[i], peers, root / str(i), ChangeFeed(100), 10, lambda: None, "pw")


def _intact(dumps: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    pass


def _torn_dumps(dumps: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    for dump in dumps:
        _truncated(dump)


def _fail_log_reset(dumps: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The follower's Raft log cannot be reset to the dump (a disk error), past the state's
    swap: it would apply its old entries onto the dump's state."""

    def clear(self: meta.journal.DurableJournal) -> None:
        raise OSError(errno.EIO, "Input/output error", str(self.path))

    monkeypatch.setattr(meta.journal.DurableJournal, "clear", clear)


@pytest.mark.parametrize(
    ("damage", "outcome"),
    [
        (_intact, None),
        (
            _torn_dumps,
            "cannot be loaded (EOFError('Compressed file ended before the end-of-stream marker "
            "was reached')), as the Raft leader sent it",
        ),
        (_fail_log_reset, "was loaded, but the Raft log could not be reset to it"),
    ],
    ids=["intact", "torn-dump", "log-reset-fails"],
)
def test_a_dump_from_the_leader_that_does_not_load_stops_the_follower(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    damage: Callable[[list[Path], pytest.MonkeyPatch], None],
    outcome: str | None,
) -> None:
    """A follower that lagged behind the leader's log compaction gets the leader's state dump
    (pysyncobj's install; its last chunk, b"", is a pickle the port must admit): it catches
    up. One that fails to load, at whatever step, sets the member's failure (the node stops on
    it), loudly, leaving no state but the one it had or the dump's."""
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    rafts = {i: _member(tmp_path, addresses, i) for i in range(3)}
    try:
        wait_for(lambda: any(r.is_leader() for r in rafts.values()), 15, "a Raft leader")
        rafts[0].submit(RegisterGroups((("before", 0),)))
        rafts.pop(2).destroy()  # lags from here on
        for i in range(5):
            rafts[0].submit(RegisterGroups(((f"group-{i}", 0),)))
        for raft in rafts.values():
            raft._sync.forceLogCompaction()
        wait_for(
            lambda: all(r.status()["log_len"] <= 2 for r in rafts.values()), 15, "compacted logs"
        )
        damage([tmp_path / str(i) / "state.dump" for i in (0, 1)], monkeypatch)
        with caplog.at_level(logging.ERROR, "rafka.meta.raft"):
            rafts[2] = lagging = _member(tmp_path, addresses, 2)
            if outcome is None:  # it catches up: the dump, then the log after it
                rafts[0].submit(RegisterGroups((("after", 0),)))
                wait_for(lambda: len(lagging.machine.state.groups) == 7, 30, "a caught-up node")
                assert lagging.failure is None
                return
            failure = wait_for(lambda: lagging.failure, 30, "the follower's failure")
        assert failure, failure
        assert outcome in failure, failure
        assert "this meta node stops" in failure
        assert "meta.data.dir aside" in failure
        assert [r.getMessage() for r in caplog.records if r.name == "rafka.meta.raft"].count(
            failure
        ) == 1  # once, though the leader sends it again
        groups = set(lagging.machine.state.groups)
        assert groups <= {"before"} or groups == {"before", *(f"group-{i}" for i in range(5))}
    finally:
        for raft in rafts.values():
            raft.destroy()


def test_a_meta_node_whose_raft_member_fails_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run_meta_node` stops the node (exit status 1 from the command line) once its Raft
    member says it cannot go on."""
    stopped: list[bool] = []

    class FailingNode:
        def __init__(self, config: object) -> None:
            self.failure: str | None = None

        def start(self) -> None:
            self.failure = "the dump cannot be loaded"

        def stop(self) -> None:
            stopped.append(True)

    monkeypatch.setattr(meta.node, "MetaServer", FailingNode)
    with pytest.raises(MetaFailedError, match="the dump cannot be loaded"):
        meta.node.run_meta_node(SimpleNamespace(node_id=1))  # type: ignore[arg-type]
    assert stopped == [True]
