"""The Fetch handler with sessions (KIP-227) against stand-in partitions: a full fetch creates a
session, incremental fetches read only the partitions that changed (counted reads), answer only
those with news, keep partitions with unsent data or errors, forget partitions, wake a long poll
on any session partition, and refuse unknown sessions, wrong epochs and topic-id mismatches."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dataplane.fetch_session import FetchSessionCache
from dataplane.handlers import fetch
from dataplane.protocol.errors import ErrorCode
from tests.unit.fetch_session.fakes import FakeReplicas, answered, context, decode, request

N = 1000


async def call(ctx: Any, req: Any) -> Any:
    response = await fetch.handle(ctx, req)
    if not isinstance(response, list):
        response = await response  # type: ignore[misc]
    return decode(ctx.header.api_version, response)


def run(ctx: Any, req: Any) -> Any:
    return anyio.run(call, ctx, req)


def start(version: int = 12, n: int = N) -> tuple[FakeReplicas, Any, Any]:
    """A full fetch of `n` partitions at offset 0; the replicas, context and its answer."""
    replicas = FakeReplicas(n)
    ctx = context(replicas, version)
    full = run(ctx, request(version, dict.fromkeys(range(n), 0)))
    return replicas, ctx, full


@pytest.mark.parametrize("version", [12, 13])
def test_incremental_fetches_read_only_what_changed(version: int) -> None:
    replicas, ctx, full = start(version)
    assert full.error_code == ErrorCode.none
    assert full.session_id != 0
    assert len(answered(full)) == N  # a full answer lists every partition
    sid = full.session_id
    replicas.reads.clear()

    nothing = run(ctx, request(version, {}, sid, 1))
    assert nothing.session_id == sid
    assert answered(nothing) == {}
    assert replicas.reads == []  # no partition changed, none was read

    for p in (3, 500, 999):
        replicas.partitions[p].produce(2)
    news = run(ctx, request(version, {}, sid, 2))
    got = answered(news)
    assert sorted(got) == [3, 500, 999]
    assert all(got[p].records == b"r" * 20 and got[p].high_watermark == 2 for p in got)
    assert sorted(i for i, _ in replicas.reads) == [3, 500, 999]
    replicas.reads.clear()

    # the client lists the three at their new offsets; nothing more to say
    moved = run(ctx, request(version, {3: 2, 500: 2, 999: 2}, sid, 3))
    assert answered(moved) == {}
    assert sorted(replicas.reads) == [(3, 2), (500, 2), (999, 2)]
    replicas.reads.clear()
    assert answered(run(ctx, request(version, {}, sid, 4))) == {}
    assert replicas.reads == []


def test_unsent_data_is_answered_later_in_turn() -> None:
    """max_bytes for one partition: the others with data stay due and come next, in turn."""
    replicas, ctx, full = start(n=10)
    sid = full.session_id
    for p in range(4):
        replicas.partitions[p].produce(1)
    seen: list[int] = []
    offsets: dict[int, int] = {}
    for epoch in range(1, 6):
        r = run(ctx, request(12, offsets, sid, epoch, max_bytes=10))
        with_records = [p for p, d in answered(r).items() if d.records]
        seen += with_records
        offsets = dict.fromkeys(with_records, 1)
    assert sorted(seen) == [0, 1, 2, 3]  # each once, none lost


def test_hw_change_without_data_for_the_client_is_reported() -> None:
    """A client whose offset is past what it is told (it read up to a later high watermark
    elsewhere) still learns of a high watermark change, once."""
    replicas, ctx, full = start(n=4)
    sid = full.session_id
    run(ctx, request(12, {1: 5}, sid, 1))  # offset 5 > high watermark 0: nothing to read
    replicas.partitions[1].produce(3)  # high watermark 3, still below the client's offset
    r = answered(run(ctx, request(12, {}, sid, 2)))
    assert list(r) == [1]
    assert r[1].high_watermark == 3
    assert r[1].records in (b"", None)
    assert answered(run(ctx, request(12, {}, sid, 3))) == {}


def test_leader_change_answers_the_error_until_forgotten() -> None:
    replicas, ctx, full = start(n=6)
    sid = full.session_id
    replicas.partitions[2].lose_leadership()
    for epoch in (1, 2):  # Kafka repeats an error in every answer
        r = answered(run(ctx, request(12, {}, sid, epoch)))
        assert list(r) == [2]
        assert r[2].error_code == ErrorCode.not_leader_or_follower
    replicas.reads.clear()
    r = run(ctx, request(12, {}, sid, 3, forgotten=[2]))
    assert answered(r) == {}
    assert r.session_id == sid
    assert len(ctx.services.fetch_sessions.get(sid)) == 5
    assert replicas.reads == []


def test_forgetting_every_partition_ends_the_session() -> None:
    _, ctx, full = start(n=3)
    sid = full.session_id
    r = run(ctx, request(12, {}, sid, 1, forgotten=[0, 1, 2]))
    assert r.session_id == 0
    assert r.error_code == ErrorCode.none
    assert ctx.services.fetch_sessions.get(sid) is None


def test_session_errors() -> None:
    _, ctx, full = start(n=3)
    sid = full.session_id
    unknown = run(ctx, request(12, {}, sid + 1, 1))
    assert unknown.error_code == ErrorCode.fetch_session_id_not_found
    assert unknown.session_id == 0
    stale = run(ctx, request(12, {}, sid, 7))
    assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
    ctx.header.api_version = 13  # a session of topic names asked with topic ids
    mixed = run(ctx, request(13, {}, sid, 1))
    assert mixed.error_code == ErrorCode.fetch_session_topic_id_error
    ctx.header.api_version = 12
    assert run(ctx, request(12, {}, sid, 1)).error_code == ErrorCode.none  # still usable


def test_full_fetch_closes_the_named_session_and_final_epoch_opens_none() -> None:
    _, ctx, full = start(n=3)
    sid = full.session_id
    sessionless = run(ctx, request(12, {0: 0}, sid, -1))
    assert sessionless.session_id == 0
    assert list(answered(sessionless)) == [0]
    assert ctx.services.fetch_sessions.get(sid) is None
    assert run(ctx, request(12, {}, sid, 1)).error_code == ErrorCode.fetch_session_id_not_found


def test_full_cache_answers_without_a_session() -> None:
    replicas = FakeReplicas(3)
    ctx = context(replicas, sessions=FetchSessionCache(1, 120_000))
    first = run(ctx, request(12, {0: 0, 1: 0}))
    second = run(ctx, request(12, {0: 0}))  # fewer partitions, the first is young: no room
    assert first.session_id != 0
    assert second.session_id == 0
    assert len(answered(second)) == 1


def test_long_poll_wakes_on_any_session_partition() -> None:
    replicas, ctx, full = start()
    sid = full.session_id

    async def main() -> Any:
        response: Any = None

        async def poll() -> None:
            nonlocal response
            response = await call(ctx, request(12, {}, sid, 1, max_wait_ms=10_000))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(poll)
                await anyio.wait_all_tasks_blocked()
                replicas.reads.clear()
                replicas.partitions[777].produce(1)
        return response

    r = anyio.run(main)
    assert list(answered(r)) == [777]
    assert answered(r)[777].records
    assert replicas.reads == [(777, 0)]  # the wake-up read one partition, not the session
