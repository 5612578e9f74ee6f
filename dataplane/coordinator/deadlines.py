"""The member deadlines of a KIP-848-family group (consumer, share and streams groups): when a
member's session expires without a heartbeat, and when a member revoking partitions or tasks
runs out of its rebalance timeout (Kafka's session and rebalance timers of
GroupMetadataManager). Soft state: never written, set again after loading (`on_loaded`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class _Member(Protocol):
    @property
    def member_epoch(self) -> int: ...


class MemberDeadlines:
    """Each member's session deadline and, while it revokes, its rebalance deadline with the
    member epoch it was set at: the deadline lapses when the member leaves or its epoch moves
    on. The group passes its current members (`members`) to the methods that prune."""

    def __init__(self) -> None:
        self._session: dict[str, int] = {}
        self._rebalance: dict[str, tuple[int, int]] = {}  # member -> (member epoch, deadline)

    def session(self, member_id: str, deadline_ms: int) -> None:
        """A heartbeat (or loading) starts the member's session again."""
        self._session[member_id] = deadline_ms

    def revoking(self, member_id: str, member_epoch: int, deadline_ms: int) -> None:
        """The member must revoke by `deadline_ms`, unless its epoch moves on first."""
        self._rebalance[member_id] = (member_epoch, deadline_ms)

    def revoked(self, member_id: str) -> None:
        self._rebalance.pop(member_id, None)

    def forget(self, member_id: str) -> None:
        """The member left or was fenced."""
        self._session.pop(member_id, None)
        self._rebalance.pop(member_id, None)

    def prune(self, members: Mapping[str, _Member]) -> list[str]:
        """Drop the deadlines of members gone and rebalance deadlines of an older member epoch;
        return the members whose session deadline was dropped."""
        gone = [m for m in self._session if m not in members]
        for m in gone:
            del self._session[m]
        for m, (epoch, _) in list(self._rebalance.items()):
            member = members.get(m)
            if member is None or member.member_epoch != epoch:
                del self._rebalance[m]
        return gone

    def next_ms(self, members: Mapping[str, _Member]) -> int | None:
        """The earliest session or rebalance deadline of a member, if any."""
        self.prune(members)
        times = [*self._session.values(), *(d for _, d in self._rebalance.values())]
        return min(times, default=None)

    def expired(self, members: Mapping[str, _Member], now_ms: int) -> list[str]:
        """Members whose session expired or who did not revoke in time, sorted."""
        self.prune(members)
        out = {m for m, d in self._session.items() if d <= now_ms}
        out |= {m for m, (_, d) in self._rebalance.items() if d <= now_ms}
        return sorted(out)

    def postpone(self, members: Mapping[str, _Member], member_id: str, deadline_ms: int) -> None:
        """Expire `member_id` again at `deadline_ms` (its fencing records could not be written;
        fencing already dropped its deadlines)."""
        if member_id in members:
            self._session[member_id] = deadline_ms

    def session_ms(self, member_id: str) -> int | None:
        return self._session.get(member_id)

    def rebalance_ms(self, member_id: str) -> int | None:
        entry = self._rebalance.get(member_id)
        return None if entry is None else entry[1]
