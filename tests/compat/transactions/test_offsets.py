"""A transaction's consumer offsets: AddOffsetsToTxn, and TxnOffsetCommit before and after
it, with topics by name or by id (v6), against an empty group or a Stable classic group's
member and generation (KIP-447).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from cluster.kafka_client import builder
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    ADD_OFFSETS,
    JOIN_GROUP,
    TOPIC,
    TXN_OFFSET_COMMIT,
    Ids,
    ask,
    compare,
    describe,
    end,
    init,
    new_id,
    topic_id,
    until_settled,
)

# -- AddOffsetsToTxn --------------------------------------------------------------------------


def add_offsets_request(side: Side, ids: Ids, group: str, version: int, epoch: int = 0) -> Any:
    pid, current = ids.of(side)
    return ask(
        side,
        ADD_OFFSETS,
        version,
        transactional_id=ids.tid,
        producer_id=pid,
        producer_epoch=current + epoch,
        group_id=group,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_add_offsets(pair: Pair, version: int) -> None:
    ids = Ids(new_id(f"offsets-v{version}"))
    init(pair, ids)
    group = new_id("group")
    v = f"AddOffsetsToTxn v{version}"

    def call(case: str, who: Ids = ids, epoch: int = 0, settle: bool = False) -> None:
        compare(
            pair,
            f"{v}: {case}",
            lambda side: add_offsets_request(side, who, group, version, epoch),
            [ids],
            settle=settle,
        )

    call("a group", settle=True)
    call("the same group again")
    call("an older epoch", epoch=-1)
    other = Ids(ids.tid, {s: p + 1000 for s, p in ids.pid.items()}, ids.epoch)
    call("another producer id", who=other)
    unknown = Ids(new_id("offsets-unknown"), {"kafka": 1, "rafka": 1}, 0)
    call("a transactional id never initialized", who=unknown)
    describe(pair, f"{v}: DescribeTransactions after it", ids)


# -- TxnOffsetCommit --------------------------------------------------------------------------

SYNC_GROUP = 14


def stable_group(side: Side, group: str) -> tuple[str, int]:
    """A classic group with one member, Stable (JoinGroup twice: KIP-394, then SyncGroup):
    the member id and generation."""
    b = builder(JOIN_GROUP, 9)

    def join(member: str) -> Any:
        return ask(
            side,
            JOIN_GROUP,
            9,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=30),
            member_id=member,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(b.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        )

    first = until_settled(lambda: join(""), f"JoinGroup on {side.name}")
    joined = join(first.member_id)
    assert joined.error_code == ErrorCode.none, joined
    s = builder(SYNC_GROUP, 5)
    synced = ask(
        side,
        SYNC_GROUP,
        5,
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(s.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b""),),
    )
    assert synced.error_code == ErrorCode.none, synced
    return joined.member_id, joined.generation_id


def txn_commit_request(
    side: Side,
    ids: Ids,
    group: str,
    version: int,
    member: tuple[str, int] = ("", -1),
    topic: str = TOPIC,
    partition: int = 0,
) -> Any:
    pid, epoch = ids.of(side)
    b = builder(TXN_OFFSET_COMMIT, version)
    t = b.TxnOffsetCommitRequestTopic(
        name=topic,  # up to v5
        topic_id=topic_id(side, topic) if version >= 6 else None,  # v6
        partitions=(
            b.TxnOffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=5,
                committed_leader_epoch=-1,
                committed_metadata="m",
            ),
        ),
    )
    return ask(
        side,
        TXN_OFFSET_COMMIT,
        version,
        transactional_id=ids.tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=member[1],
        member_id=member[0],
        group_instance_id=None,
        topics=(t,),
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6])
def test_txn_offset_commit(pair: Pair, version: int) -> None:
    """After AddOffsetsToTxn (below v5) or not (v5+ adds the group's partition itself); v6
    names topics by id (KIP-1319)."""
    ids = Ids(new_id(f"toc-v{version}"))
    init(pair, ids)
    group = new_id("toc-group")
    v = f"TxnOffsetCommit v{version}"

    def call(case: str, settle: bool = False, **kw: Any) -> None:
        compare(
            pair,
            f"{v}: {case}",
            lambda side: txn_commit_request(
                side,
                ids,
                kw.get("group", group),
                version,
                **{k: val for k, val in kw.items() if k != "group"},
            ),
            [ids],
            settle=settle,
        )

    call("before AddOffsetsToTxn", settle=True)  # the group's coordinator may be loading
    pair.both(
        lambda side: until_settled(
            lambda: add_offsets_request(side, ids, group, 3), "AddOffsetsToTxn"
        )
    )
    call("an empty group", settle=True)
    call("an unknown topic" + (" id" if version >= 6 else ""), topic="compat-txn-nope")
    call("an unknown partition", partition=9)
    call("an empty group id", group="")
    if version >= 3:
        call("a member id and generation of a group that has none", member=("m-1", 3))
    end(pair, ids, True)


def test_txn_offset_commit_members(pair: Pair) -> None:
    """v3+ checks the member and generation (KIP-447) against a Stable classic group."""
    ids = Ids(new_id("toc-members"))
    init(pair, ids)
    group = new_id("toc-members-group")
    members = dict(
        zip(("kafka", "rafka"), pair.both(lambda side: stable_group(side, group)), strict=True)
    )
    pair.both(
        lambda side: until_settled(
            lambda: add_offsets_request(side, ids, group, 3), "AddOffsetsToTxn"
        )
    )
    for case, member in [
        ("the group's member and generation", lambda m: m),
        ("an older generation", lambda m: (m[0], m[1] - 1)),
        ("a newer generation", lambda m: (m[0], m[1] + 1)),
        ("an unknown member id", lambda m: ("nobody", m[1])),
        ("no member id, generation -1", lambda m: ("", -1)),
    ]:

        def commit_as(side: Side, member: Callable[[Any], Any] = member) -> Any:
            return txn_commit_request(side, ids, group, 4, member=member(members[side.name]))

        compare(pair, f"TxnOffsetCommit v4: {case}", commit_as, [ids])
    end(pair, ids, False)
