"""Share sessions (Kafka's ShareSessionCache): what each share consumer fetches from this
broker, keyed by (group id, member id), so that after the first ShareFetch the consumer sends
only changes.

Epoch 0 opens a full session (replacing the member's previous one), -1 closes it, any other
epoch must be the session's next one (INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND
when there is none). A ShareFetch adds the partitions it names and drops its forgotten ones.
As Kafka's ShareSessionContext, the first ShareFetch is answered for every partition, the
next ones only for the partitions with records or an error, the partitions added since, and
those whose last answer was an error; a partition that returned records moves to the end of
the session, so the next fetches start with the others.
The cache holds at most group.share.max.share.sessions sessions: a new one then replaces one
unused for longer than the share session timeout (its member has left the group by then), or
is refused with SHARE_SESSION_LIMIT_REACHED.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from dataplane.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("rafka.share")

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

TopicPartition = tuple[bytes, int]
"""A partition of a share session: (topic id, partition index)."""


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: wraps to 1, never 0 or -1."""
    return 1 if epoch >= 0x7FFFFFFF or epoch < 0 else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the member's next request must carry
    last_used_ms: int
    # the session's partitions, in fetch order: whether the next answer must include it
    partitions: dict[TopicPartition, bool] = field(default_factory=dict)
    connection: object = None  # the client connection that opened it: it ends with it

    def answers(self, tp: TopicPartition, records: bool, failed: bool) -> bool:
        """Whether a subsequent ShareFetch's answer includes `tp`, which acquired `records`
        or `failed` (Kafka's CachedSharePartition.maybeUpdateResponseData)."""
        pending = self.partitions.get(tp)
        if not (records or failed or pending or pending is None):
            return False
        if pending is not None:
            if records:
                del self.partitions[tp]  # to the end
            self.partitions[tp] = failed
        return True


class ShareSessionCache:
    """The share sessions of this broker."""

    def __init__(self, max_sessions: int, idle_eviction_ms: int) -> None:
        self.max_sessions = max_sessions
        self.idle_eviction_ms = idle_eviction_ms
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(
        self,
        group_id: str,
        member_id: str,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        connection: object = None,
    ) -> tuple[ShareSession, ShareSession | None]:
        """Epoch 0: a new full session. Returns it and the member's previous session, if any
        (its acquired records stay acquired until acknowledged or expired, as in Kafka)."""
        key = (group_id, member_id)
        previous = self._sessions.pop(key, None)
        if len(self._sessions) >= self.max_sessions and not self._evict_idle(now_ms):
            if previous is not None:
                self._sessions[key] = previous
            log.warning(
                "share session of member %s of group %s refused: %d sessions is the limit "
                "(group.share.max.share.sessions); raise it or run fewer share consumers",
                member_id,
                group_id,
                self.max_sessions,
            )
            raise KafkaError(ErrorCode.share_session_limit_reached)
        session = ShareSession(
            group_id,
            member_id,
            next_epoch(INITIAL_EPOCH),
            now_ms,
            dict.fromkeys(partitions, False),
            connection,
        )
        self._sessions[key] = session
        return session, previous

    def update(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicPartition],
        forgotten: Iterable[TopicPartition],
        now_ms: int,
    ) -> ShareSession:
        """A ShareFetch in an open session: check the epoch, apply the changes, advance."""
        session = self._expect(group_id, member_id, epoch)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in added:
            session.partitions.setdefault(tp, True)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        return session

    def acknowledged(self, group_id: str, member_id: str, epoch: int, now_ms: int) -> None:
        """A ShareAcknowledge in an open session (it cannot open one: epoch 0 is refused)."""
        if epoch == INITIAL_EPOCH:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a session"
            )
        session = self._expect(group_id, member_id, epoch)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms

    def close(self, group_id: str, member_id: str) -> ShareSession:
        """Epoch -1: the session ends (the caller releases the member's records)."""
        session = self._sessions.pop((group_id, member_id), None)
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found)
        return session

    def close_connection(
        self, connection: object, keys: Iterable[tuple[str, str]]
    ) -> list[ShareSession]:
        """Kafka's disconnect listener: `connection` closed; the sessions it opened among
        `keys` (group id, member id) end (those a newer connection reopened stay)."""
        closed = []
        for key in keys:
            session = self._sessions.get(key)
            if session is not None and session.connection is connection:
                closed.append(self._sessions.pop(key))
        return closed

    def _expect(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(
                ErrorCode.share_session_not_found,
                f"no share session for member {member_id} of group {group_id}",
            )
        if session.epoch != epoch:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch,
                f"expected share session epoch {session.epoch}, got {epoch}",
            )
        return session

    def _evict_idle(self, now_ms: int) -> bool:
        """Drop the least recently used session if it has been idle past the limit."""
        if not self._sessions:
            return False
        oldest = min(self._sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - oldest.last_used_ms <= self.idle_eviction_ms:
            return False
        del self._sessions[(oldest.group_id, oldest.member_id)]
        log.info(
            "evicted the idle share session of member %s of group %s",
            oldest.member_id,
            oldest.group_id,
        )
        return True
