"""Share sessions: epochs, forgotten topics, the cache bound (Kafka's ShareSessionCache)."""

from __future__ import annotations

import pytest

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.sessions import ShareSessionCache, next_epoch

T1, T2 = b"\x01" * 16, b"\x02" * 16


def codes(fn, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn(*args)
    return e.value.code


def test_open_update_close():
    cache = ShareSessionCache(10, 1000)
    session, previous = cache.open("g", "m", [(T1, 0)], now_ms=0)
    assert previous is None
    assert session.epoch == 1
    assert list(session.partitions) == [(T1, 0)]
    session = cache.update("g", "m", 1, [(T2, 0)], [], now_ms=1)
    assert session.epoch == 2
    assert list(session.partitions) == [(T1, 0), (T2, 0)]
    session = cache.update("g", "m", 2, [], [(T1, 0)], now_ms=2)
    assert list(session.partitions) == [(T2, 0)]
    assert cache.close("g", "m") is session
    assert len(cache) == 0


def test_epochs_must_follow():
    cache = ShareSessionCache(10, 1000)
    cache.open("g", "m", [], 0)
    assert codes(cache.update, "g", "m", 5, [], [], 0) == ErrorCode.invalid_share_session_epoch
    assert codes(cache.update, "g", "x", 1, [], [], 0) == ErrorCode.share_session_not_found
    assert codes(cache.close, "g", "x") == ErrorCode.share_session_not_found


def test_acknowledge_cannot_open_and_advances_the_epoch():
    cache = ShareSessionCache(10, 1000)
    assert codes(cache.acknowledged, "g", "m", 0, 0) == ErrorCode.invalid_share_session_epoch
    cache.open("g", "m", [], 0)
    cache.acknowledged("g", "m", 1, 0)
    session = cache.get("g", "m")
    assert session is not None
    assert session.epoch == 2


def test_reopening_replaces_the_session():
    cache = ShareSessionCache(10, 1000)
    first, _ = cache.open("g", "m", [(T1, 0)], 0)
    cache.update("g", "m", 1, [], [], 0)
    second, previous = cache.open("g", "m", [(T2, 1)], 0)
    assert previous is first
    assert second.epoch == 1
    assert list(second.partitions) == [(T2, 1)]


def test_limit_reached_unless_an_idle_session_can_go():
    cache = ShareSessionCache(2, idle_eviction_ms=100)
    cache.open("g", "a", [], 0)
    cache.open("g", "b", [], 50)
    assert codes(cache.open, "g", "c", [], 100) == ErrorCode.share_session_limit_reached
    cache.open("g", "c", [], 101)  # "a" idle for 101 ms: evicted
    assert cache.get("g", "a") is None
    assert cache.get("g", "c") is not None
    # a member reopening its own session is never refused
    cache.open("g", "b", [], 102)


def test_epoch_wraps_past_max_int():
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(5) == 6


def test_a_closed_connection_ends_the_sessions_it_opened():
    cache = ShareSessionCache(10, 1000)
    first, second = object(), object()
    cache.open("g", "a", [(T1, 0)], 0, first)
    cache.open("g", "b", [(T1, 0)], 0, first)
    cache.open("g", "c", [(T1, 0)], 0, second)
    cache.open("g", "b", [(T1, 0)], 1, second)  # b reopened on another connection: it stays
    closed = cache.close_connection(first, [("g", "a"), ("g", "b"), ("g", "gone")])
    assert [s.member_id for s in closed] == ["a"]
    assert cache.get("g", "a") is None
    assert cache.get("g", "b") is not None
    assert len(cache) == 2


def test_subsequent_answers_carry_only_news():
    """Kafka's ShareSessionContext: after the first answer, a partition is answered when it
    acquired records or failed, once after it joined the session, and again after a failure;
    one that returned records moves to the end of the fetch order."""
    cache = ShareSessionCache(10, 1000)
    session, _ = cache.open("g", "m", [(T1, 0), (T1, 1)], now_ms=0)
    assert not session.answers((T1, 0), records=False, failed=False)  # nothing new
    assert session.answers((T1, 1), records=True, failed=False)
    assert list(session.partitions) == [(T1, 0), (T1, 1)]
    session = cache.update("g", "m", 1, [(T2, 0), (T1, 0)], [], now_ms=1)
    assert session.answers((T2, 0), records=False, failed=False)  # just added
    assert not session.answers((T2, 0), records=False, failed=False)
    assert session.answers((T1, 0), records=False, failed=True)
    assert session.answers((T1, 0), records=False, failed=False)  # once more after an error
    assert not session.answers((T1, 0), records=False, failed=False)
    assert session.answers((T1, 0), records=True, failed=False)
    assert list(session.partitions) == [(T1, 1), (T2, 0), (T1, 0)]
