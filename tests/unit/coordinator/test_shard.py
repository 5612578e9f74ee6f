"""The shard's group-agnostic APIs: offsets fetch/delete, DeleteGroups, offsets expiry, and the
replay dispatch (unknown record types skipped, each shard's table of record types)."""

from __future__ import annotations

import struct

import pytest

from dataplane.coordinator.base import Group
from dataplane.coordinator.records import decode_record, offset_commit_record
from dataplane.coordinator.timer import Timer
from dataplane.log.records import Record

from .harness import E, Harness, subscription
from .support import ManualClock, local_shard

DAY = 24 * 3600 * 1000


def test_fetch_offsets() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 5, ("t", 2): 7, ("u", 0): 1})
    error, fetched = h.shard.fetch_offsets("g", [("t", [0, 1, 2]), ("x", [0])])
    assert error == E.none
    got = {(t.topic, p): (o.offset if o else -1) for t in fetched for p, o, _ in t.partitions}
    assert got == {("t", 0): 5, ("t", 1): -1, ("t", 2): 7, ("x", 0): -1}
    _, every = h.shard.fetch_offsets("g", None)
    assert {(t.topic, p.partition) for t in every for p in t.partitions} == {
        ("t", 0),
        ("t", 2),
        ("u", 0),
    }
    error, fetched = h.shard.fetch_offsets("missing", [("t", [0])])
    assert error == E.none
    assert fetched[0].partitions == ((0, None, E.none),)


def test_offset_delete() -> None:
    h = Harness()
    leader, _follower = h.stable_group(2, protocols=(("range", subscription("t")),))
    h.commit(leader, 1, {("t", 0): 1, ("old", 0): 2})
    error, errors, records = h.shard.delete_offsets("g", [("t", [0]), ("old", [0, 1])])
    assert error == E.none
    assert errors == {
        ("t", 0): E.group_subscribed_to_topic,
        ("old", 0): E.none,
        ("old", 1): E.none,
    }
    assert records == [offset_commit_record("g", "old", 0, None)]
    h.services.append("g", records, True)
    assert h.committed() == {("t", 0): 1}
    assert h.shard.delete_offsets("missing", [("t", [0])])[0] == E.group_id_not_found
    # a non-empty group of another protocol type cannot have its offsets deleted
    h.join(group="connect", protocol_type="connect", version=3)
    h.settle()
    assert h.shard.delete_offsets("connect", [("t", [0])])[0] == E.non_empty_group


def test_delete_groups() -> None:
    h = Harness()
    h.stable_group(1)
    h.commit("", -1, {("t", 0): 1, ("t", 1): 2}, group="idle")
    errors, records = h.shard.delete_groups(["g", "idle", "missing", "idle"])
    assert errors == {"g": E.non_empty_group, "idle": E.none, "missing": E.group_id_not_found}
    decoded = [decode_record(k, v) for k, v in records]
    assert [(r.type_id, r.value) for r in decoded if r] == [(1, None), (1, None), (2, None)]
    h.services.append("idle", records, True)
    assert "idle" not in h.shard.groups
    assert "idle" not in h.shard.offsets.committed
    assert "idle" not in h.replayed().groups


def test_offsets_of_an_empty_group_expire_after_the_retention() -> None:
    h = Harness(offsets_retention_ms=7 * DAY)
    (member,) = h.stable_group(1)
    h.commit(member, 1, {("t", 0): 5})
    h.advance(20_000)  # the member stops heartbeating: its session ends, the group empties
    group = h.classic_group()
    assert group.state_name == "Empty"
    emptied_at = group.current_state_timestamp
    assert emptied_at is not None
    h.services.clock.ms = emptied_at + 7 * DAY - 1
    assert h.shard.expire_offsets() == ({}, [])  # retention counts from when it emptied
    h.services.clock.advance(1)
    by_group, deleted = h.shard.expire_offsets()
    assert deleted == ["g"]
    kinds = [decode_record(k, v).type_id for k, v in by_group["g"]]  # type: ignore[union-attr]
    assert kinds == [1, 2]  # the offset's tombstone, then the group's
    h.services.append("g", by_group["g"], True)
    assert "g" not in h.shard.groups
    assert "g" not in h.shard.offsets.committed


def test_stable_consumer_groups_only_lose_offsets_of_topics_nobody_subscribes_to() -> None:
    h = Harness(offsets_retention_ms=DAY, max_session_timeout_ms=10 * DAY)
    (member,) = h.stable_group(1, protocols=(("range", subscription("t")),), session=3 * DAY)
    h.commit(member, 1, {("t", 0): 5, ("gone", 0): 1})
    h.services.clock.advance(2 * DAY)
    by_group, deleted = h.shard.expire_offsets()
    assert deleted == []
    assert by_group == {"g": [offset_commit_record("g", "gone", 0, None)]}


def test_simple_group_offsets_expire_from_their_commit() -> None:
    h = Harness(offsets_retention_ms=DAY)
    h.commit("", -1, {("t", 0): 5}, group="s")
    h.services.clock.advance(DAY // 2)
    h.commit("", -1, {("t", 1): 6}, group="s")
    h.services.clock.advance(DAY // 2)
    by_group, deleted = h.shard.expire_offsets()
    assert by_group == {"s": [offset_commit_record("s", "t", 0, None)]}
    assert deleted == []


def test_replay_skips_unknown_record_types_and_bad_records() -> None:
    shard, _ = local_shard()
    consumer_group_epoch = struct.pack(">hh", 3, 1) + b"g" + b"\x00\x00\x01\x02"
    shard.replay(Record(0, 0, consumer_group_epoch, b"\x00\x00\x00", ()))
    shard.replay(Record(1, 0, struct.pack(">h", 1) + b"\x00", b"junk", ()))
    shard.replay(Record(2, 0, None, b"", ()))
    assert shard.skipped_records == 3
    assert not shard.groups


@pytest.mark.parametrize("key", [None, b"", b"\x01"], ids=["null", "empty", "one-byte"])
def test_a_key_too_short_for_its_type_is_skipped(key: bytes | None) -> None:
    shard, _ = local_shard()
    shard.replay(Record(0, 0, key, b"\x00\x03", ()))
    shard.replay_transactional(7, 0, Record(1, 0, key, b"\x00\x03", ()))
    assert shard.skipped_records == 2
    assert not shard.groups


def test_replay_dispatches_by_the_shards_own_table() -> None:
    seen: list[Record] = []
    shard, _ = local_shard(index=7)
    shard.replayers[250] = seen.append  # this shard only: no other shard knows type 250
    record = Record(0, 0, struct.pack(">h", 250) + b"key", None, ())
    shard.replay(record)
    assert seen == [record]
    other, _ = local_shard()
    other.replay(record)
    assert other.skipped_records == 1


def test_timer_fires_in_deadline_order_and_rescheduling_replaces() -> None:
    clock = ManualClock(0)
    timer = Timer(clock.now)
    fired: list[str] = []
    timer.schedule("a", 100, lambda: fired.append("a"))
    timer.schedule("b", 50, lambda: fired.append("b"))
    timer.schedule("a", 200, lambda: fired.append("a2"))  # a heartbeat pushed "a" back
    timer.schedule("c", 10, lambda: fired.append("c"))
    timer.cancel("c")
    assert timer.next_deadline() == 50
    clock.advance(150)
    assert timer.fire_due() == 1
    assert fired == ["b"]
    clock.advance(50)
    timer.fire_due()
    assert fired == ["b", "a2"]
    assert len(timer) == 0
    assert timer.next_deadline() is None


class OtherGroup(Group):
    """A group of another type (as a KIP-848 consumer group plugs in)."""

    TYPE = "consumer"

    def __init__(self, group_id: str, members: int) -> None:
        super().__init__(group_id)
        self.members = members

    @property
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    @property
    def protocol_type_name(self) -> str:
        return "consumer"

    def is_empty(self) -> bool:
        return not self.members

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        return [(struct.pack(">h", 3) + b"\x00\x01" + self.group_id.encode(), None)]

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> E:
        return E.none if self.is_empty() else E.unknown_member_id


def test_groups_of_other_types_plug_into_the_shard() -> None:
    h = Harness()
    h.shard.add_group(OtherGroup("busy", members=2))
    h.shard.add_group(OtherGroup("idle", members=0))
    assert h.services.created == ["busy", "idle"]
    listed = {g.group_id: (g.type, g.state) for g in h.shard.list_groups()}
    assert listed == {"busy": ("consumer", "Stable"), "idle": ("consumer", "Empty")}
    assert [g.group_id for g in h.shard.list_groups(types=["consumer"], states=["stable"])] == [
        "busy"
    ]
    # the classic protocol against them: Kafka's answers for a group that cannot serve it
    assert h.join(group="busy", version=3).value.error == E.inconsistent_group_protocol
    assert h.sync("m", 1, group="busy").value.error == E.unknown_member_id
    assert h.heartbeat("m", 1, group="busy") == E.unknown_member_id
    assert h.shard.leave_group("busy", [("m", None, None)]) == (E.none, [E.unknown_member_id])
    # an empty one becomes a classic group: its records are deleted, its offsets kept
    h.commit("", -1, {("t", 0): 4}, group="idle")
    log_size = len(h.services.log)
    reply = h.join(group="idle", version=3)
    h.settle()
    assert reply.value.error == E.none
    assert h.services.log[log_size] == OtherGroup("idle", 0).tombstones()[0]
    assert h.shard.groups["idle"].TYPE == "classic"
    assert h.committed("idle") == {("t", 0): 4}
