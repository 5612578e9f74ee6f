"""Leader-epoch cache: Kafka's ``leader-epoch-checkpoint`` (LeaderEpochFileCache).

An ordered list of (epoch, start offset): the first offset written under each leader epoch. It is
what OffsetForLeaderEpoch answers from, and what a follower uses to find where its log diverged
from the leader's. Persisted as one JSON value in the `StateStore` on every change (changes happen
once per leader election, truncation or log-start move, never per append).
"""

from __future__ import annotations

from bisect import bisect_right

from dataplane.log.state_store import StateStore

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, store: StateStore, key: str) -> None:
        self._store = store
        self._key = key
        self._entries: list[tuple[int, int]] = [tuple(e) for e in store.get_json(key, [])]

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1 (Kafka's UNDEFINED_EPOCH) when none is known."""
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def _save(self) -> None:
        self._store.put_json(self._key, self._entries)

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` if that is news; entries that would
        break monotonicity (same or later epoch, same or later offset) are dropped first."""
        if epoch < 0:
            return
        if self._entries:
            latest_epoch, latest_start = self._entries[-1]
            if epoch == latest_epoch and start_offset >= latest_start:
                return
        while self._entries and (
            self._entries[-1][0] >= epoch or self._entries[-1][1] >= start_offset
        ):
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= ``epoch``, the start offset of the first
        epoch after it), or the log end offset for the latest epoch; (-1, -1) when unknown."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._entries[-1][0]:
            return epoch, log_end_offset
        epochs = [e for e, _ in self._entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        next_start = self._entries[higher][1]
        if higher == 0:  # older than anything we know: the data before is gone
            return epoch, next_start
        return self._entries[higher - 1][0], next_start

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at ``offset`` was written in, or -1 if unknown."""
        starts = [s for _, s in self._entries]
        i = bisect_right(starts, offset) - 1
        return self._entries[i][0] if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [e for e in self._entries if e[1] < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly before it and move the start
        of the epoch that covers it up to it."""
        before = [e for e in self._entries if e[1] <= start_offset]
        if not before:
            return
        self._entries = [(before[-1][0], start_offset), *self._entries[len(before) :]]
        self._save()

    def clear(self) -> None:
        self._entries = []
        self._save()
