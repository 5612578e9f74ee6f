"""This broker's view of its lease with the meta service, so a broker cut off from the meta
nodes stops coordinating before the meta service hands its partitions to another broker.

The meta service fences a broker once ``broker.session.timeout.ms`` passes after the last
heartbeat it received (meta/leases.py) and then moves the broker's leaderships; a broker that
cannot reach the meta service never learns it. It can count, though: the meta service received
a heartbeat no earlier than the broker sent it, so ``sent + broker.session.timeout.ms`` is no
later than the lease's end on the meta side. The broker treats its lease as lapsed a safety
margin (one ``broker.heartbeat.interval.ms``) before that, and its coordinators answer
NOT_COORDINATOR from then on — as Kafka's do when they no longer lead the partition — until a
heartbeat succeeds again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("rafka.meta_lease")


class MetaLease:
    """When this broker's last successful heartbeat was sent, on a monotonic clock."""

    def __init__(
        self,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # the margin: one heartbeat interval, but never the whole session
        margin_ms = min(heartbeat_interval_ms, session_timeout_ms // 2)
        self._valid_s = (session_timeout_ms - margin_ms) / 1000
        self._session_timeout_ms = session_timeout_ms
        self._clock = clock
        self._sent = clock()  # registration just started a fresh lease on the meta side
        self._lapsed = False

    def now(self) -> float:
        """The clock's time, to take just before sending a heartbeat."""
        return self._clock()

    def renewed(self, sent: float) -> None:
        """A heartbeat (or registration) sent at `sent` (from `now`) succeeded."""
        self._sent = max(self._sent, sent)
        if self._lapsed and not self._expired():
            self._lapsed = False
            log.warning(
                "heartbeat to the meta service succeeded again: this broker's lease is renewed "
                "and it coordinates groups and transactions again for the coordinator "
                "partitions it still leads"
            )

    def lapsed(self) -> bool:
        """Whether the lease may have run out on the meta side (logs when that starts)."""
        if not self._expired():
            return False
        if not self._lapsed:
            self._lapsed = True
            log.warning(
                "no heartbeat reached the meta service for %.1fs (broker.session.timeout.ms is "
                "%d): the meta service may have fenced this broker and moved its partitions, so "
                "it answers NOT_COORDINATOR to group, share and transaction coordinator requests "
                "until a heartbeat succeeds. Check the network path from this broker to the meta "
                "nodes and that a meta quorum is up",
                self._clock() - self._sent,
                self._session_timeout_ms,
            )
        return True

    def _expired(self) -> bool:
        return self._clock() - self._sent > self._valid_s
