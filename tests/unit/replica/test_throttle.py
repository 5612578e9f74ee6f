"""Replication throttles: which replicas a topic's throttled-replicas list names on a broker,
where the rate comes from (per broker, cluster default, static), and the token bucket."""

from __future__ import annotations

from types import SimpleNamespace

from dataplane.config import BrokerConfig
from dataplane.metadata_cache import MetadataCache, TopicInfo
from dataplane.replica.throttle import UNLIMITED, ReplicationThrottle, throttled_partitions

TOPIC_ID = b"t".ljust(16, b"\0")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def throttle(
    side: str = "follower", replicas: str = "", rate: int = UNLIMITED
) -> tuple[ReplicationThrottle, Clock, SimpleNamespace]:
    """A throttle of broker 4 and the settings in force it reads (change `.rate` to alter)."""
    cache = MetadataCache()
    cache.topics_by_id[TOPIC_ID] = TopicInfo(
        "t", TOPIC_ID, (), {f"{side}.replication.throttled.replicas": replicas}, False
    )
    settings = SimpleNamespace(node_id=4, **{f"{side}_replication_throttled_rate": rate})
    clock = Clock()
    return ReplicationThrottle(side, lambda: settings, cache, clock), clock, settings  # type: ignore[arg-type,return-value]


def test_throttled_partitions_of_a_broker() -> None:
    assert throttled_partitions("0:101,0:102,1:101,1:102", 102) == {0, 1}
    assert throttled_partitions("0:101, 2:102", 103) == frozenset()
    assert throttled_partitions(" * ", 7) == throttled_partitions("*", 1)
    assert throttled_partitions("0:x,bad,3:4", 4) == {3}


def test_only_listed_replicas_out_of_sync_are_held_back() -> None:
    t, _, _ = throttle(replicas="0:4,1:5", rate=100)
    assert t.applies(TOPIC_ID, 0)
    assert not t.applies(TOPIC_ID, 1)
    assert not t.applies(b"x" * 16, 0)  # unknown topic
    t.record(TOPIC_ID, 0, 1000)  # overdraws the bucket: 10 s at 100 B/s
    assert t.holds_back(TOPIC_ID, 0, in_sync=False)
    assert not t.holds_back(TOPIC_ID, 0, in_sync=True)  # in-sync traffic is never delayed
    assert not t.holds_back(TOPIC_ID, 1, in_sync=False)  # not listed here


def test_bucket_refills_at_the_rate_and_holds_one_second() -> None:
    t, clock, _ = throttle(replicas="*", rate=1000)
    assert t.rate() == 1000
    assert t.delay_s() == 0
    t.record(TOPIC_ID, 9, 3000)
    assert t.delay_s() == 3.0
    clock.now += 2.5
    assert t.delay_s() == 0.5
    clock.now += 100  # idle: the bucket fills to one second's worth, no more
    t.record(TOPIC_ID, 9, 1500)
    assert t.delay_s() == 0.5


def test_a_changed_rate_applies_at_once() -> None:
    t, _, settings = throttle("leader", "*", rate=1000)
    t.record(TOPIC_ID, 0, 3000)
    settings.leader_replication_throttled_rate = 4000  # the 3000 bytes owed go 4x faster
    assert t.delay_s() == 0.75
    settings.leader_replication_throttled_rate = 0
    assert t.rate() == 1  # Kafka's minimum is 0; a zero rate would never pay back


def test_unlimited_never_holds_back_nor_runs_up_debt() -> None:
    t, _, settings = throttle(replicas="*")
    t.record(TOPIC_ID, 0, 10**12)
    assert t.delay_s() == 0
    assert not t.holds_back(TOPIC_ID, 0, in_sync=False)
    settings.follower_replication_throttled_rate = 1000  # a limit set later starts afresh
    assert t.rate() == 1000
    assert t.delay_s() == 0


def test_static_config_fields_default_to_unlimited() -> None:
    config = BrokerConfig()
    assert config.leader_replication_throttled_rate == UNLIMITED
    assert config.follower_replication_throttled_rate == UNLIMITED
