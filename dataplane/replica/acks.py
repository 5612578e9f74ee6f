"""acks=all waits, as Kafka's DelayedProduce: one request waits on one event however many
partitions it wrote.

Each leader partition keeps its pending waits in offset order (`PendingAcks`) and settles them
as its high watermark passes them, or fails them when its leadership moves; the request's
`ReplicationWait` completes when its last partition does. Nothing is created per partition
beyond a queue entry, and a request whose partitions are all replicated by the time its answer
is due is `done` without waiting (the server then writes it with the answers beside it).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

import anyio

from dataplane.protocol.errors import ErrorCode


class ReplicationWait:
    """One request's wait: a code per slot (one slot per partition it wrote), set as each
    partition settles; slots still unset when the wait times out are REQUEST_TIMED_OUT."""

    __slots__ = ("_codes", "_event", "_left")

    def __init__(self, slots: int) -> None:
        self._codes: list[ErrorCode | None] = [None] * slots
        self._left = slots
        self._event: anyio.Event | None = None

    @property
    def done(self) -> bool:
        return self._left == 0

    def settle(self, slot: int, code: ErrorCode) -> None:
        if self._left and self._codes[slot] is None:
            self._codes[slot] = code
            self._left -= 1
            if self._left == 0 and self._event is not None:
                self._event.set()

    async def codes(self, timeout: float) -> list[ErrorCode]:
        """Each slot's code once all are settled or `timeout` (seconds) passed."""
        if self._left:
            self._event = anyio.Event()
            with anyio.move_on_after(timeout):
                await self._event.wait()
            self._left = 0  # late settlements change nothing now
        return [ErrorCode.request_timed_out if c is None else c for c in self._codes]


class LeaderState(Protocol):
    """What settling a wait reads of the partition."""

    @property
    def is_leader(self) -> bool: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def min_insync_replicas(self) -> int: ...


class PendingAcks:
    """A partition's acks=all waits, in the order of their offsets (appends only grow them)."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[tuple[int, int, ReplicationWait, int]] = deque()

    def add(
        self, state: LeaderState, offset: int, leader_epoch: int, wait: ReplicationWait, slot: int
    ) -> None:
        """Settle `wait`'s `slot` once the high watermark reaches `offset`."""
        self._queue.append((offset, leader_epoch, wait, slot))
        self.settle(state)

    def settle(self, state: LeaderState) -> None:
        """Kafka's checkEnoughReplicasReachOffset for the waits at the head: NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas, once
        the high watermark passed them; NOT_LEADER_OR_FOLLOWER when leadership moved since
        their append. Called on every change of the high watermark, leadership or ISR."""
        queue = self._queue
        while queue:
            offset, epoch, wait, slot = queue[0]
            if not state.is_leader or state.leader_epoch != epoch:
                code = ErrorCode.not_leader_or_follower
            elif state.high_watermark >= offset:
                enough = len(state.isr) >= state.min_insync_replicas
                code = ErrorCode.none if enough else ErrorCode.not_enough_replicas_after_append
            else:
                return
            queue.popleft()
            wait.settle(slot, code)

    def fail_all(self) -> None:
        """The replica is closing (deleted, moved): its waits end as NOT_LEADER_OR_FOLLOWER."""
        while self._queue:
            _, _, wait, slot = self._queue.popleft()
            wait.settle(slot, ErrorCode.not_leader_or_follower)
