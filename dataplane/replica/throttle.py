"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73): cap the bytes a reassignment
(or any catching-up replica) moves, so that copying a partition does not starve clients.

Each broker has two: the leader side limits what it sends to followers
(`leader.replication.throttled.rate`), the follower side what it fetches
(`follower.replication.throttled.rate`), in bytes/s. Only the replicas a topic lists in
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` count
("partition:broker,..." entries naming this broker, or "*" for all), and, as in Kafka, only a
replica outside the ISR is ever held back: in-sync traffic is recorded but never delayed, so a
throttle cannot stall acks=all producers.

The rate is a token bucket holding at most one second of traffic; a read may overdraw it (one
fetch is never split), and the next one waits until it is back above zero. Rates are Kafka's
dynamic broker configs, read from the settings in force (dataplane/dynamic_config.py: per
broker, then the cluster-wide default, then the static setting); a change applies to the next
fetch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import lru_cache

from dataplane.config import BrokerConfig
from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.replication")

UNLIMITED = 2**63 - 1
_LOG_EVERY_S = 60.0  # at most one "throttled" line a minute per side
_ALL = frozenset({-1})  # "*": every partition (marker; never a real partition index)


@lru_cache(maxsize=256)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions a `*.replication.throttled.replicas` value throttles on ``broker_id``
    (Kafka's parseThrottledPartitions); `_ALL` for "*". Malformed entries are ignored: the
    configs' own validation refuses them before they are stored."""
    value = value.strip()
    if value == "*":
        return _ALL
    out = set()
    for entry in value.split(","):
        partition, _, broker = entry.strip().partition(":")
        try:
            if int(broker) == broker_id:
                out.add(int(partition))
        except ValueError:
            continue
    return frozenset(out)


class ReplicationThrottle:
    """One side's (``"leader"`` or ``"follower"``) rate limit on this broker."""

    def __init__(
        self,
        side: str,
        config: Callable[[], BrokerConfig],
        cache: MetadataCache,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`config` gives the broker settings in force (they change with rafka configs)."""
        self.rate_name = f"{side}.replication.throttled.rate"
        self.replicas_name = f"{side}.replication.throttled.replicas"
        self._field = f"{side}_replication_throttled_rate"
        self._config = config
        self._cache = cache
        self._clock = clock
        self._tokens = 0.0
        self._last = clock()
        self._next_log = 0.0

    def applies(self, topic_id: bytes, index: int) -> bool:
        """Whether the partition's topic lists this replica as throttled on this side."""
        info = self._cache.topics_by_id.get(topic_id)
        value = info.configs.get(self.replicas_name, "") if info is not None else ""
        if not value.strip():
            return False
        partitions = throttled_partitions(value, self._config().node_id)
        return partitions is _ALL or index in partitions

    def holds_back(self, topic_id: bytes, index: int, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: skip this partition in this
        fetch (an out-of-sync, throttled replica while the rate is exceeded)."""
        if in_sync or not self.applies(topic_id, index):
            return False
        delay = self.delay_s()
        if delay > 0 and self._clock() >= self._next_log:
            self._next_log = self._clock() + _LOG_EVERY_S
            log.info(
                "%s=%d bytes/s reached: replication of throttled replicas (%s) waits %.1fs; "
                "raise or delete the rate (rafka configs) to speed reassignments up",
                self.rate_name,
                self.rate(),
                self.replicas_name,
                delay,
            )
        return delay > 0

    def record(self, topic_id: bytes, index: int, size: int) -> None:
        """Count bytes replicated for a throttled partition (in sync or not, as Kafka does)."""
        if size and self.applies(topic_id, index) and self._refill() < UNLIMITED:
            self._tokens -= size  # no debt while unlimited: a later limit starts afresh

    def delay_s(self) -> float:
        """How long until the bucket is no longer overdrawn (0: a read may go now)."""
        rate = self._refill()
        return 0.0 if self._tokens >= 0 else -self._tokens / rate

    def rate(self) -> int:
        """The current bytes/s limit (`UNLIMITED` when none; 0 counts as 1 byte/s)."""
        return max(1, int(getattr(self._config(), self._field)))

    def _refill(self) -> int:
        rate = self.rate()
        now = self._clock()
        elapsed, self._last = now - self._last, now
        if rate >= UNLIMITED:
            self._tokens = 0.0
        else:
            self._tokens = min(float(rate), self._tokens + elapsed * rate)
        return rate
