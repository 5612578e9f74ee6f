"""One in-process Raft member: its state survives a restart from a state dump plus journal."""

from __future__ import annotations

from pathlib import Path

from meta.commands import CreateTopics, RegisterBroker
from meta.feed import ChangeFeed
from meta.raft import MetaRaft
from meta.topic_planning import NewTopic
from tests.integration.conftest import wait_for

from .harness import free_ports


def start(address: str, data_dir: Path, feed: ChangeFeed) -> MetaRaft:
    return MetaRaft(address, [], data_dir, feed, write_timeout_s=10, on_leadership=lambda: None)


def create(raft: MetaRaft, name: str) -> None:
    raft.submit(CreateTopics((NewTopic(name, 2, 1, (), topic_id=name.encode().ljust(16, b"-")),)))


def test_state_survives_a_dump_and_a_restart(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    raft = start(address, tmp_path, ChangeFeed(100))
    try:
        raft.submit(RegisterBroker(1, "h", 9092, None, "", b"incarnation", False))
        create(raft, "before-dump")
        raft._sync.forceLogCompaction()  # normally every 5000 entries or 5 minutes
        wait_for((tmp_path / "state.dump").exists, 15, "the state dump")
        create(raft, "after-dump")
        state = raft.machine.state
        expected = (state.offset, dict(state.topics), dict(state.brokers))
    finally:
        raft.destroy()

    feed = ChangeFeed(100)
    restarted = start(address, tmp_path, feed)
    try:
        machine = restarted.machine
        wait_for(lambda: machine.state.offset == expected[0], 15, "the journal replay")
        assert (machine.state.topics, machine.state.brokers) == expected[1:]
        # The dump reset the change feed: a watcher from before it needs a snapshot.
        assert feed.since(0) is None
        assert [e.topic.name for e in feed.since(expected[0] - 1) or []] == ["after-dump"]
    finally:
        restarted.destroy()
