"""This broker's view of its lease with the meta service, so a broker cut off from the meta
nodes stops coordinating before the meta service hands its partitions to another broker.

The meta service fences a broker once ``broker.session.timeout.ms`` passes after the last
heartbeat it received (meta/leases.py) and then moves the broker's leaderships; a broker that
cannot reach the meta service never learns it. It can count, though: the meta service received
a heartbeat no earlier than the broker sent it, so ``sent + broker.session.timeout.ms`` is no
later than the lease's end on the meta side. The broker treats its lease as lapsed a safety
margin (one ``broker.heartbeat.interval.ms``) before that, and its coordinators answer
NOT_COORDINATOR from then on — as Kafka's do when they no longer lead the partition — until a
heartbeat succeeds again and the broker has applied the metadata the meta leader had when it
answered: if the broker was fenced meanwhile, its leaderships moved, and it must see that before
it answers as a coordinator again.
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
        self._applied = -1  # the metadata offset this broker has applied (cache and replicas)
        self._catch_up = -1  # the offset to apply before coordinating again after a lapse

    def now(self) -> float:
        """The clock's time, to take just before sending a heartbeat."""
        return self._clock()

    def renewed(self, sent: float, metadata_offset: int | None = None) -> None:
        """A heartbeat sent at `sent` (from `now`) succeeded, answered at the meta leader's
        `metadata_offset`; or a registration (None), which tells no offset and so renews only
        a lease that has not run out."""
        if self._expired():
            if metadata_offset is None:
                return  # the next heartbeat renews it, with the offset to catch up to
            self._catch_up = max(self._catch_up, metadata_offset)
        self._sent = max(self._sent, sent)
        if self._lapsed and not self._expired():
            self._lapsed = False
            log.warning(
                "heartbeat to the meta service succeeded again: this broker's lease is renewed "
                "and, once it has applied the metadata changes made meanwhile (offset %d), it "
                "coordinates groups and transactions again for the coordinator partitions it "
                "still leads",
                self._catch_up,
            )

    def applied(self, offset: int) -> None:
        """The broker's metadata cache and replicas have applied the changes up to `offset`."""
        self._applied = offset

    def lapsed(self) -> bool:
        """Whether the lease may have run out on the meta side (logs when that starts), or was
        renewed after that but this broker has not yet applied what it may have missed."""
        if not self._expired():
            return self._applied < self._catch_up
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
