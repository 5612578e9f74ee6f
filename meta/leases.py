"""Broker leases, kept in memory by the Raft leader only (like KRaft's BrokerHeartbeatManager).

A broker holds a lease while it heartbeats at least every ``broker.session.timeout.ms``; when
the lease runs out the leader proposes to fence it. Leases are not replicated: a newly elected
leader knows nothing of past heartbeats, so it starts every lease fresh rather than fencing
brokers that were heartbeating to the old leader.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping


class BrokerLeases:
    def __init__(
        self, session_timeout_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._timeout = session_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._leases: dict[int, tuple[int, float]] = {}  # broker id -> (epoch, expiry)

    def renew(self, broker_id: int, epoch: int) -> None:
        """A heartbeat from ``broker_id`` at ``epoch`` arrived."""
        with self._lock:
            self._leases[broker_id] = (epoch, self._clock() + self._timeout)

    def clear(self) -> None:
        """Forget all leases (this node just became the Raft leader)."""
        with self._lock:
            self._leases.clear()

    def expired(self, unfenced: Mapping[int, int]) -> list[tuple[int, int]]:
        """The (broker id, epoch) pairs among ``unfenced`` (id -> epoch) whose lease ran out.

        A broker without a lease for its current epoch (registered through another node, or
        before this node became leader) gets a fresh one instead.
        """
        now = self._clock()
        with self._lock:
            for broker_id in self._leases.keys() - unfenced.keys():
                del self._leases[broker_id]  # fenced or gone: a heartbeat renews it again
            expired = []
            for broker_id, epoch in unfenced.items():
                lease = self._leases.get(broker_id)
                if lease is None or lease[0] != epoch:
                    self._leases[broker_id] = (epoch, now + self._timeout)
                elif lease[1] < now:
                    expired.append((broker_id, epoch))
            return expired
