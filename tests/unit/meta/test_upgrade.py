"""A data dir of the format before metadata records is read after the upgrade, and what is
written from then on is records (meta.records).

``fixtures/pickled-datadir`` was written by Rafka before the records (commit e7b0357): a
single-node MetaRaft ran ``legacy_steps.BEFORE_DUMP``, compacted its log into a state dump, then
ran ``legacy_steps.AFTER_DUMP``. Its Raft log holds pickled ``Command`` objects after the dump's
position, its dump a pickled ``MetaState``.
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from pysyncobj import pickle

from meta.commands import Command, RegisterGroups
from meta.feed import ChangeFeed
from meta.journal import read_records
from meta.raft import MetaRaft
from meta.records import decode_command, decode_state
from meta.state import MetaState
from meta.topic_planning import Rejection
from tests.integration.conftest import wait_for
from tests.integration.meta.harness import free_ports

from .legacy_steps import AFTER_DUMP, BEFORE_DUMP
from .machine import Machine

FIXTURE = Path(__file__).parent / "fixtures" / "pickled-datadir"


def expected_state() -> MetaState:
    machine = Machine()
    for step in BEFORE_DUMP + AFTER_DUMP:
        machine.run(step(machine.state))
    return machine.state


def metadata(state: MetaState) -> tuple[Any, ...]:
    """All of the state but the request ids and clocks of remembered requests, and the wording
    of remembered refusals (the dump keeps the messages of its time; the code may reword)."""
    results = [_worded(r.result) for r in state.applied_requests.values()]
    return (state.cluster_id, state.offset, state.topics, state.brokers, state.next_producer_id,
            state.groups, results)  # fmt: skip


def _worded(result: Any) -> Any:
    if isinstance(result, list):
        return [replace(o, message="") if isinstance(o, Rejection) else o for o in result]
    return result


def dumped_state(data_dir: Path) -> Any:
    """The consumer data of the state dump (pysyncobj's format: a gzipped pickle)."""
    return pickle.loads(gzip.decompress((data_dir / "state.dump").read_bytes()))[0][1]


def logged_commands(data_dir: Path) -> list[Any]:
    """The argument of apply_command in each regular entry of the Raft log."""
    entries = [entry for _, _, entry in read_records((data_dir / "raft.log").read_bytes())]
    return [pickle.loads(command[1:])[1][0] for command, _, _ in entries if command[0] == 0]


def start(address: str, data_dir: Path) -> MetaRaft:
    return MetaRaft(address, [], data_dir, ChangeFeed(100), 10, on_leadership=lambda: None)


def test_a_pickled_data_dir_is_read_then_rewritten_as_records(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    assert isinstance(dumped_state(tmp_path)["state"], MetaState)  # the fixture's own format
    assert all(isinstance(c, Command) for c in logged_commands(tmp_path))
    expected = expected_state()
    address = f"127.0.0.1:{free_ports(1)[0]}"

    raft = start(address, tmp_path)
    try:
        machine = raft.machine
        wait_for(lambda: machine.state.offset == expected.offset, 15, "the journal replay")
        assert metadata(machine.state) == metadata(expected)
        assert raft.submit(RegisterGroups((("g3", 1),))) == 1  # it serves writes
        raft._sync.forceLogCompaction()
        wait_for(lambda: isinstance(dumped_state(tmp_path), bytes), 15, "a dump of records")
        raft.submit(RegisterGroups((("g4", 2),)))
        upgraded = machine.state
    finally:
        raft.destroy()

    assert decode_state(dumped_state(tmp_path)).groups == {"g1": 3, "g3": 1}
    [*_, last] = logged_commands(tmp_path)
    assert decode_command(last).body == RegisterGroups((("g4", 2),))

    restarted = start(address, tmp_path)
    try:
        machine = restarted.machine
        wait_for(lambda: "g4" in machine.state.groups, 15, "the journal replay")
        assert machine.state == upgraded
    finally:
        restarted.destroy()
