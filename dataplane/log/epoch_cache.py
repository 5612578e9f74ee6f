"""Leader-epoch cache: Kafka's ``leader-epoch-checkpoint`` (LeaderEpochFileCache).

An ordered list of (epoch, start offset): the first offset written under each leader epoch. It is
what OffsetForLeaderEpoch answers from, and what a follower uses to find where its log diverged
from the leader's. Persisted as one JSON value in the `StateStore` on every change (changes happen
once per leader election, truncation or log-start move, never per append).

A cache whose stored value is missing (a lost state store) or unreadable starts empty and says
so (`needs_rebuild`): the log's recovery rebuilds it from the batches' partition leader epochs
(recovery.py), as Kafka's recovery assigns each batch's epoch to the cache.
"""

from __future__ import annotations

import json
import logging
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from dataplane.log.state_store import StateStore

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def _entries_of(value: Any) -> list[tuple[int, int]] | None:
    """The entries of a stored value, or None unless it is a list of [epoch, start offset]
    pairs of ints, both increasing."""
    if not isinstance(value, list):
        return None
    entries: list[tuple[int, int]] = []
    for entry in value:
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and all(type(number) is int for number in entry)
            and (not entries or (entry[0] > entries[-1][0] and entry[1] > entries[-1][1]))
        ):
            return None
        entries.append((entry[0], entry[1]))
    return entries


class LeaderEpochCache:
    def __init__(self, store: StateStore, key: str) -> None:
        self._store = store
        self._key = key
        raw = store.get_bytes(key)
        try:
            entries = None if raw is None else _entries_of(json.loads(raw))
        except ValueError:  # not JSON, or not UTF-8
            entries = None
        if raw is not None and entries is None:
            log.warning("%s: unreadable leader-epoch checkpoint %r...", key, raw[:64])
        # No usable stored entries: the owner rebuilds them from its log (`rebuild`).
        self.needs_rebuild = entries is None
        self._entries: list[tuple[int, int]] = entries or []

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
        if self._assign(epoch, start_offset):
            self._save()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self._entries:
            latest_epoch, latest_start = self._entries[-1]
            if epoch == latest_epoch and start_offset >= latest_start:
                return False
        while self._entries and (
            self._entries[-1][0] >= epoch or self._entries[-1][1] >= start_offset
        ):
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        return True

    def rebuild(self, batches: Iterable[tuple[int, int]]) -> None:
        """Replace the entries with those of a log's batches: (partition leader epoch, base
        offset) of each, in log order (Kafka's recovery assigns every batch so). One write."""
        self._entries = []
        for epoch, base_offset in batches:
            self._assign(epoch, base_offset)
        self.needs_rebuild = False
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
