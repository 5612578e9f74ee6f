"""The recent changes of this node's state, kept so Watch streams can resume without a snapshot."""

from __future__ import annotations

import threading
from collections import deque
from itertools import islice

from proto import meta_pb2


class ChangeFeed:
    """A bounded buffer of the latest WatchEvents, in offset order, without gaps.

    The state machine publishes into it while applying commands (on pysyncobj's thread); Watch
    handlers read from it and wait on it (on gRPC threads).
    """

    def __init__(self, capacity: int) -> None:
        self._events: deque[meta_pb2.WatchEvent] = deque(maxlen=capacity)
        self._base = 0  # offset just before the oldest buffered event
        self._cond = threading.Condition()
        self._closed = False

    def publish(self, events: list[meta_pb2.WatchEvent]) -> None:
        """Append the events of one applied command (possibly none) and wake the waiters."""
        with self._cond:
            for event in events:
                if len(self._events) == self._events.maxlen:
                    self._base = self._events[0].offset
                self._events.append(event)
            self._cond.notify_all()

    def reset(self, offset: int) -> None:
        """Forget everything: the state jumped to ``offset`` (a Raft snapshot was installed)."""
        with self._cond:
            self._events.clear()
            self._base = offset
            self._cond.notify_all()

    def since(self, offset: int) -> list[meta_pb2.WatchEvent] | None:
        """The buffered events after ``offset``; None if some of them are no longer buffered."""
        with self._cond:
            if offset < self._base:
                return None
            return list(islice(self._events, offset - self._base, None))

    def wait(self, offset: int, timeout: float) -> None:
        """Block until an event after ``offset`` is published, the feed changes, or timeout."""
        with self._cond:
            if self._closed or self._last_offset() > offset:
                return
            self._cond.wait(timeout)

    def wake(self) -> None:
        """Wake all waiters (e.g. one whose stream was cancelled) so they re-check."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def _last_offset(self) -> int:
        return self._events[-1].offset if self._events else self._base
