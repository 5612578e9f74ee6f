"""Chaos runs: continuous producers and a consumer against a real cluster while the nemesis
kills and pauses nodes, then the checker's verdict (Kafka's promise for acks=all: no acknowledged
write lost, one record per offset on every replica, no duplicates with idempotence, monotonic
offsets for consumers). Select them with ``-m chaos``; ``-s`` (or ``-rA``) shows the figures.

- `test_rf1_broker_kill9[plain|idempotent]` - RF=1: kill -9 of partition leaders, of random
  brokers and of the meta Raft leader. Acknowledged data must survive a broker's kill -9 and
  restart (the page cache keeps it), and nothing else may go wrong around it; with idempotent
  producers, not even a duplicate.
- `test_rf3_acks_all_failover` - RF=3, min.insync.replicas=2, unclean election off: kill -9 of
  partition leaders (failover), SIGSTOP of a follower past replica.lag.time.max.ms (ISR shrink,
  then catch-up), kill -9 of the meta Raft leader.

Each test prints its report (figures, per-fault unavailability, verdict) and its timings; the run
directory (tmp_path) keeps the nodes' logs, ``history.jsonl`` and ``report.txt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.verify.run import REPLICATED_OVERRIDES, VerifyConfig, run_verify
from cluster.verify.schedule import Schedule
from cluster.verify.workload.produce import WorkloadConfig
from tests.integration.clients.drivers import java_command

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(300)
@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_rf1_broker_kill9(tmp_path: Path, idempotent: bool) -> None:
    """plain: confluent-kafka and Java, acks=all, idempotence off (duplicates allowed, counted);
    idempotent: confluent-kafka with enable.idempotence=true and Java with its defaults."""
    cfg = VerifyConfig(
        workload=WorkloadConfig(
            topic="chaos-rf1",
            partitions=6,
            replication_factor=1,
            min_insync_replicas=1,
            idempotent_py=idempotent,
            plain_py=not idempotent,
            java="4.3.0",
            java_command=java_command("4.3.0"),
            java_idempotence=None if idempotent else False,
        ),
        schedule=Schedule(
            kinds=("kill-leader", "kill-broker", "kill-meta-leader"),
            rounds=5,
            down_s=3.0,
            quiet_s=3.0,
            full_isr=False,
        ),
    )
    report = run_verify(tmp_path, cfg)
    assert report.ok, report.text()
    figures: dict[str, Any] = report.figures  # of several types: counts, fault lists
    assert figures["acknowledged"] > 1000, report.text()
    assert set(figures["faults"]) == set(cfg.schedule.kinds), report.text()


@pytest.mark.timeout(300)
def test_rf3_acks_all_failover(tmp_path: Path) -> None:
    lag_ms = int(REPLICATED_OVERRIDES["replica.lag.time.max.ms"])
    session_ms = int(REPLICATED_OVERRIDES["broker.session.timeout.ms"])
    pause_s = 4.0
    # The pause must outlast the lag time (ISR shrink) but not the session (no fencing).
    assert lag_ms / 1000 < pause_s < session_ms / 1000
    cfg = VerifyConfig(
        workload=WorkloadConfig(
            topic="chaos-rf3",
            partitions=6,
            replication_factor=3,
            min_insync_replicas=2,
            java="4.3.0",
            java_command=java_command("4.3.0"),
        ),
        schedule=Schedule(
            kinds=("kill-leader", "pause-follower", "kill-meta-leader"),
            rounds=6,
            down_s=pause_s,
            quiet_s=4.0,
            full_isr=True,
        ),
        overrides=dict(REPLICATED_OVERRIDES),
    )
    report = run_verify(tmp_path, cfg)
    assert report.ok, report.text()
    figures: dict[str, Any] = report.figures  # of several types: counts, fault lists
    assert figures["acknowledged"] > 1000, report.text()
    assert set(figures["faults"]) == set(cfg.schedule.kinds), report.text()
