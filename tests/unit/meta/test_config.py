"""MetaConfig: Kafka-style names, quorum parsing and validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from meta.config import MetaConfig


def test_defaults_make_a_single_node_quorum() -> None:
    config = MetaConfig.load()
    assert config.node_id == 1
    assert config.voters() == {1: "127.0.0.1:9292"}
    assert config.grpc_addresses() == {1: "0.0.0.0:9192"}
    assert config.broker_session_timeout_ms == 9000
    assert config.meta_data_dir == Path("./data/meta")
    assert config.auto_leader_rebalance_enable
    assert config.leader_imbalance_check_interval_seconds == 300


def test_leader_rebalance_settings() -> None:
    config = MetaConfig.load(
        overrides={
            "auto.leader.rebalance.enable": "false",
            "leader.imbalance.check.interval.seconds": "1",
        }
    )
    assert not config.auto_leader_rebalance_enable
    assert config.leader_imbalance_check_interval_seconds == 1
    with pytest.raises(ValueError, match="greater than 0"):
        MetaConfig.load(overrides={"leader.imbalance.check.interval.seconds": "0"})


def test_three_voters_from_overrides_and_properties(tmp_path: Path) -> None:
    properties = tmp_path / "meta.properties"
    properties.write_text(
        "meta.quorum.voters=1@a:9292,2@b:9292,3@c:9292\n"
        "meta.quorum.listeners=1@a:9192,2@b:9192,3@c:9192\n"
        "broker.session.timeout.ms=3000\n"
    )
    config = MetaConfig.load(properties, {"node.id": "2", "unclean.leader.election.enable": "true"})
    assert config.node_id == 2
    assert config.unclean_leader_election_enable
    assert config.voters()[3] == "c:9292"
    assert config.grpc_addresses()[1] == "a:9192"
    assert config.broker_session_timeout_ms == 3000
    assert config.as_properties()["meta.quorum.voters"] == "1@a:9292,2@b:9292,3@c:9292"


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"node.id": "4"}, "node.id 4 is not in meta.quorum.voters: set meta.raft.listener"),
        ({"meta.quorum.voters": "1@a"}, "expected id@host:port"),
        ({"meta.quorum.voters": "1@a:1,1@b:2"}, "appears twice"),
        ({"meta.quorum.voters": "1@a:1,2@b:2"}, "no address for node(s) [1, 2]"),
        ({"meta.quorum.voters": "1@a:1,2@b:2", "meta.quorum.listeners": "1@a:3"}, "[2]"),
        ({"meta.bogus": "1"}, "unknown setting"),
    ],
)
def test_invalid_quorums_are_refused(overrides: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        MetaConfig.load(overrides=overrides)
