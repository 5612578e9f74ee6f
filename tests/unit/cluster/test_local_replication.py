"""`rafka up` gives its topics min(3, brokers) replicas, the internal topics too (issue 25): their
coordinators need that many live brokers before the topics are created (Kafka's rule), so a
one-broker cluster (`rafka up --brokers 1`, `make run ARGS="--brokers 1 --meta 1"`) must ask
for one replica, and `-o` still wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.local import LocalCluster
from common.settings import parse_properties

INTERNAL = (
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "share.coordinator.state.topic.replication.factor",
)


def _broker_properties(cluster: LocalCluster, broker: int = 1) -> dict[str, str]:
    return parse_properties(cluster.nodes[f"broker-{broker}"].config_file.read_text())


@pytest.mark.parametrize(("brokers", "factor"), [(1, "1"), (2, "2"), (3, "3"), (5, "3")])
def test_every_topic_gets_min_3_brokers_replicas(tmp_path: Path, brokers: int, factor: str) -> None:
    props = _broker_properties(LocalCluster(brokers, 1, tmp_path, 20000))
    for setting in ("default.replication.factor", *INTERNAL):
        assert props[setting] == factor, setting


def test_an_override_wins(tmp_path: Path) -> None:
    cluster = LocalCluster(1, 1, tmp_path, 20000, {"offsets.topic.replication.factor": "3"})
    props = _broker_properties(cluster)
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["transaction.state.log.replication.factor"] == "1"
