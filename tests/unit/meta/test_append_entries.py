"""A follower deletes Raft log entries only from the first conflict (meta.raft.trim_append_entries).

pysyncobj deletes everything after an AppendEntries' ``prevLogIdx``; the message is rewritten so
that entries the log already holds stay, with their acknowledgement never taken back.
"""

from __future__ import annotations

from typing import Any

from meta.raft import trim_append_entries


def entries(*terms: tuple[int, int]) -> list[tuple[bytes, int, int]]:
    """Log entries from (index, term) pairs."""
    return [(b"c%d" % index, index, term) for index, term in terms]


LOG = entries((1, 1), (2, 1), (3, 2), (4, 2), (5, 2))


def append(prev: tuple[int, int], *sent: tuple[int, int], term: int = 2) -> dict[str, Any]:
    return {
        "type": "append_entries",
        "term": term,
        "commit_index": 3,
        "prevLogIdx": prev[0],
        "prevLogTerm": prev[1],
        "entries": entries(*sent),
    }


def test_entries_the_log_holds_leave_the_message() -> None:
    got = trim_append_entries(LOG, append((2, 1), (3, 2), (4, 2), (5, 2), (6, 2)))
    assert (got["prevLogIdx"], got["prevLogTerm"]) == (5, 2)
    assert got["entries"] == entries((6, 2))
    assert got["commit_index"] == 3
    assert got["term"] == 2


def test_deletion_starts_at_the_first_conflict() -> None:
    got = trim_append_entries(LOG, append((2, 1), (3, 2), (4, 3), (5, 3), term=3))
    assert (got["prevLogIdx"], got["prevLogTerm"]) == (3, 2)
    assert got["entries"] == entries((4, 3), (5, 3))


def test_entries_all_held_and_more_of_the_senders_term_stay() -> None:
    """The leader went back (a stale answer): the log already has all it sends, and more of its
    own entries after them, which a crash must not take from disk."""
    got = trim_append_entries(LOG, append((2, 1), (3, 2)))
    assert (got["prevLogIdx"], got["prevLogTerm"], got["entries"]) == (5, 2, [])
    heartbeat = trim_append_entries(LOG, append((3, 2)))
    assert (heartbeat["prevLogIdx"], heartbeat["prevLogTerm"], heartbeat["entries"]) == (5, 2, [])


def test_entries_of_an_older_term_after_the_matched_ones_are_cut_not_rewritten() -> None:
    """After a new leader (term 3) the log's older-term tail may not be the leader's: deleting
    it is right, but what matched is not deleted and written again."""
    got = trim_append_entries(LOG, append((1, 1), (2, 1), (3, 2), term=3))
    assert (got["prevLogIdx"], got["prevLogTerm"], got["entries"]) == (3, 2, [])


def test_messages_it_cannot_improve_pass_unchanged() -> None:
    unchanged = [
        append((5, 2)),  # a heartbeat at the log's end
        append((5, 2), (6, 2)),  # new entries right after the log's end
        append((4, 3), (5, 3), term=3),  # prevLogTerm differs: pysyncobj answers "go back"
        append((7, 2), (8, 2)),  # beyond the log's end: the same
        append((2, 1), (3, 3), term=3),  # the first entry conflicts
        {**append((2, 1)), "transmission": "start", "data": b""},  # a large entry in chunks
        {"type": "request_vote", "term": 3, "last_log_index": 5, "last_log_term": 2},
    ]
    for message in unchanged:
        assert trim_append_entries(LOG, message) is message, message
    assert trim_append_entries([], append((0, 0), (1, 1))) == append((0, 0), (1, 1))
