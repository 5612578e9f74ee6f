"""What an OffsetCommit answers when the write of its offsets fails."""

from __future__ import annotations

import anyio
import pytest

from dataplane.coordinator.base import Reply
from dataplane.handlers import offset_commit
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode

E = ErrorCode


def answer(write_error: ErrorCode) -> ErrorCode:
    """The error of a one-partition commit whose write failed with ``write_error``."""
    stored: Reply[ErrorCode] = Reply()
    stored.complete(write_error)
    topic = offset_commit.Topic("t", b"\x01" * 16, [0])
    ok = {("t", 0): E.none}
    response = anyio.run(
        offset_commit._stored, ResponseBuilder(offset_commit.API_KEY, 9), [topic], ok, ok, stored
    )
    [partition] = response.topics[0].partitions
    return ErrorCode(partition.error_code)


@pytest.mark.parametrize(
    ("write_error", "expected"),
    [
        (E.not_enough_replicas, E.coordinator_not_available),
        (E.request_timed_out, E.coordinator_not_available),
        (E.not_leader_or_follower, E.not_coordinator),
        # Kafka 4's group coordinator maps every operation's write failures alike
        # (CoordinatorOperationExceptionHelper): a write too large is no commit-specific
        # INVALID_COMMIT_OFFSET_SIZE any more.
        (E.message_too_large, E.unknown_server_error),
        (E.record_list_too_large, E.unknown_server_error),
    ],
)
def test_a_failed_offsets_write_answers_as_every_group_write(
    write_error: ErrorCode, expected: ErrorCode
) -> None:
    assert answer(write_error) == expected
