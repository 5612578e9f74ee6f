"""Replication fetch sessions (KIP-227 for followers): the follower's gRPC stream is the session.

Without them each round of every stream listed every followed partition, and the leader read,
recorded and watched each one, twice: with thousands of partitions an idle cluster spent its CPU
on polling. With them:

- the follower (`FollowerSession`) sends a partition only when its fetch state changed (added,
  a new fetch offset, log start or epoch), when it retries one that got an error, and lists the
  ones it dropped; the first request of a stream, and every request until the leader said it
  keeps sessions, carries every partition (`full`), and replaces the session;
- the leader (`LeaderSession`) holds each partition's last state as a standing fetch, hears of
  every change of the partitions it holds (`partition_changed`, from `Partition`), and answers
  only the dirty ones: the long poll waits on one event per stream, set by urgent changes
  (appends, log start, leadership); a moved high watermark goes with the next answer, as a
  follower's fetch is not completed early by one in Kafka either.

The follower stays in the ISR while idle at the log end: its standing fetch counts as re-sent at
each request of the stream (`FollowerState.session`), and a paused or vanished follower stops
sending them, so it still leaves after replica.lag.time.max.ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import anyio

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

Key = tuple[bytes, int]  # (topic id, partition)


class FetchState(NamedTuple):
    """What a follower fetch says of one partition: any change is sent to the leader."""

    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    max_bytes: int


# -- follower ------------------------------------------------------------------------------------


class FollowerSession:
    """The follower's half of one stream: what the leader's session holds for each partition."""

    def __init__(self) -> None:
        self.sent: dict[Key, FetchState] = {}  # the leader's view of each partition
        self.incremental = False  # the leader keeps sessions: send changes only
        self._candidates: dict[Key, None] = {}  # may have changed since they were sent
        self._retry_at: dict[Key, float] = {}  # send again at (monotonic s), changed or not
        self._held: set[Key] = set()  # left out by the follower throttle: checked each round

    def changed(self, key: Key) -> None:
        """The partition's state may differ from what was sent (or it was added or removed)."""
        self._candidates[key] = None

    def retry(self, key: Key, at: float) -> None:
        """Send the partition again at `at` even if unchanged: its last answer was unusable
        (an error, or records that did not continue the log), and the leader answers a
        partition only when it is sent or changes there."""
        self._retry_at[key] = at

    def confirm(self, incremental_supported: bool) -> None:
        """The leader's answer: whether it keeps this stream's session."""
        self.incremental = incremental_supported

    def reset(self) -> None:
        """The leader dropped the session (a refused request): the next request is full."""
        self.incremental = False

    def expected_epoch(self, key: Key) -> int | None:
        """The leader epoch the leader answers `key` under (None: not in the session)."""
        sent = self.sent.get(key)
        return None if sent is None else sent.leader_epoch

    @property
    def holds_back(self) -> bool:
        return bool(self._held)

    def next_request(
        self,
        followed: Iterable[Key],
        state: Callable[[Key], FetchState | None],
        held: Callable[[Key], bool],
        now: float,
    ) -> tuple[list[tuple[Key, FetchState]], list[Key], bool]:
        """The partitions to send with their state, the ones to drop from the session, and
        whether the request is full. `followed`: every partition followed from this leader;
        `state`: a partition's current state (None: no longer followed); `held`: left out by
        the follower throttle this round (dropped from the session until it is not)."""
        full = not self.incremental
        if full:
            keys: Iterable[Key] = list(followed)
            self.sent.clear()
            self._held.clear()
            self._candidates.clear()
            self._retry_at.clear()
            forced: set[Key] = set()
        else:
            forced = {k for k, at in self._retry_at.items() if at <= now}
            for key in forced:
                del self._retry_at[key]
            keys = {**self._candidates, **dict.fromkeys(forced), **dict.fromkeys(self._held)}
            self._candidates = {}
        send: list[tuple[Key, FetchState]] = []
        removed: list[Key] = []
        for key in keys:
            current = state(key)
            if current is None or held(key):
                if current is None:
                    self._held.discard(key)
                    self._retry_at.pop(key, None)
                else:
                    self._held.add(key)
                if self.sent.pop(key, None) is not None:
                    removed.append(key)
                continue
            self._held.discard(key)
            if full or key in forced or self.sent.get(key) != current:
                self.sent[key] = current
                send.append((key, current))
        return send, removed, full


# -- leader --------------------------------------------------------------------------------------


@dataclass(slots=True)
class SessionPartition:
    """The leader's side of one partition of a session: the follower's standing fetch."""

    state: FetchState
    partition: Partition | None = None  # the leader's replica, subscribed to
    fresh: bool = True  # a state not yet recorded on the partition (the follower's progress)
    answer: bool = True  # the follower sent it: answered even with nothing new
    high_watermark: int = -1  # as last answered (-1: never)
    log_start_offset: int = -1
    log_end_offset: int = -1


@dataclass(eq=False)  # held by partitions in a set: by identity
class LeaderSession:
    """The leader's half of one follower's stream (Kafka's FetchSession, for one follower)."""

    replica_id: int
    last_request_ms: int = 0  # the follower's liveness (`FollowerState.caught_up_ms`)
    broker_epoch: int = -1  # of the follower's last request (KIP-903: `FollowerState`)
    entries: dict[Key, SessionPartition] = field(default_factory=dict)
    dirty: dict[Key, None] = field(default_factory=dict)  # to evaluate, in order
    event: anyio.Event = field(default_factory=anyio.Event)  # set by urgent changes
    # Partitions where the follower is out of the ISR: recorded again at every request, as a
    # re-sent fetch would be, so a refused or lost ISR expansion is retried.
    out_of_sync: set[Key] = field(default_factory=set)

    def receive(
        self,
        partitions: Iterable[tuple[Key, FetchState]],
        removed: Iterable[Key],
        full: bool,
        now: int,
        broker_epoch: int = -1,
    ) -> None:
        """A request: new states (all of them when `full`) and partitions dropped. A new
        `broker_epoch` (the follower registered again) is recorded anew with every partition."""
        self.last_request_ms = now
        self.event = anyio.Event()  # the long poll of this request waits for new changes
        if broker_epoch != self.broker_epoch:
            self.broker_epoch = broker_epoch
            for key, held in self.entries.items():
                held.fresh = True
                self.dirty[key] = None
        states = dict(partitions)
        if full:
            removed = [k for k in self.entries if k not in states]
        for key in removed:
            entry = self.entries.pop(key, None)
            self.dirty.pop(key, None)
            self.out_of_sync.discard(key)
            if entry is not None:
                self._release(entry)
        for key in self.out_of_sync:
            self.entries[key].fresh = True
            self.dirty[key] = None
        for key, state in states.items():
            entry = self.entries.get(key)
            if entry is None:
                self.entries[key] = SessionPartition(state)
            else:
                entry.state, entry.fresh, entry.answer = state, True, True
            self.dirty[key] = None

    def partition_changed(self, partition: Partition, urgent: bool) -> None:
        """From a subscribed partition: evaluate it again; `urgent` ends the long poll."""
        key = (partition.topic_id, partition.index)
        if key in self.entries:
            self.dirty[key] = None
            if urgent:
                self.event.set()

    def set_in_sync(self, key: Key, in_sync: bool) -> None:
        if in_sync:
            self.out_of_sync.discard(key)
        else:
            self.out_of_sync.add(key)

    def to_evaluate(self, full: bool) -> list[Key]:
        """The partitions to answer this round (every one for a full request)."""
        return list(self.entries) if full else list(self.dirty)

    def bind(self, entry: SessionPartition, partition: Partition | None) -> None:
        """The leader's replica for `entry` is now `partition` (None: none here)."""
        if entry.partition is partition:
            return
        self._release(entry)
        entry.partition = partition
        if partition is not None:
            partition.subscribe(self)

    def answered(self, key: Key, hw: int, log_start: int, log_end: int, keep: bool) -> None:
        """`key` went out in an answer (with these offsets); `keep`: evaluate it again next
        round (records it could not take this time: the throttle or the response's size)."""
        entry = self.entries[key]
        entry.answer = False
        entry.high_watermark, entry.log_start_offset = hw, log_start
        entry.log_end_offset = log_end
        if not keep:
            self.dirty.pop(key, None)

    def settled(self, key: Key) -> None:
        """`key` had nothing to say: clean until it changes again."""
        self.dirty.pop(key, None)

    def close(self) -> None:
        """The stream ended: the follower's standing fetches end with it."""
        for entry in self.entries.values():
            self._release(entry)
        self.entries.clear()
        self.dirty.clear()
        self.out_of_sync.clear()

    def _release(self, entry: SessionPartition) -> None:
        if entry.partition is not None:
            entry.partition.unsubscribe(self)
            entry.partition.end_standing_fetch(self.replica_id, self)
            entry.partition = None
