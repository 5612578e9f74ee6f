"""Finalized feature levels: ApiVersions advertises them from the meta service's Raft state,
UpdateFeatures changes them (validate_only, upgrade/downgrade rules, all or nothing), every
broker and the Java client follow: with transaction.version downgraded to 1 a Kafka 4 client
runs the classic transaction protocol (AddPartitionsToTxn, EndTxn v4), back at 2 KIP-890's."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cluster.local import LocalCluster
from tests.integration.clients.drivers import ensure_setup, run_driver
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder

API_VERSIONS, UPDATE_FEATURES = 18, 57
NONE, INVALID_UPDATE_VERSION = 0, 95
UPGRADE, SAFE_DOWNGRADE = 1, 2
TV = "transaction.version"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("features"), brokers=3, metas=1) as c:
        yield c


def api_versions(cluster: LocalCluster, broker: int, version: int = 4) -> Any:
    with WireClient(cluster.nodes[f"broker-{broker}"].port) as c:
        return c.call(
            API_VERSIONS, version, client_software_name="wire", client_software_version="1"
        )


def finalized(cluster: LocalCluster, broker: int = 1) -> dict[str, int]:
    return {f.name: f.max_version_level for f in api_versions(cluster, broker).finalized_features}


def update(
    cluster: LocalCluster, levels: dict[str, tuple[int, int]], version: int = 1, **fields: Any
) -> Any:
    """UpdateFeatures at broker 2: feature -> (level, upgrade type)."""
    b = builder(UPDATE_FEATURES, version)
    with WireClient(cluster.nodes["broker-2"].port) as c:
        keys = tuple(
            b.FeatureUpdateKey(
                feature=name,
                max_version_level=level,
                **(
                    {"upgrade_type": kind} if version >= 1 else {"allow_downgrade": kind != UPGRADE}
                ),
            )
            for name, (level, kind) in levels.items()
        )
        return c.call(UPDATE_FEATURES, version, timeout=30000, feature_updates=keys, **fields)


def set_level(cluster: LocalCluster, level: int, kind: int) -> None:
    r = update(cluster, {TV: (level, kind)})
    assert (r.error_code, r.error_message) == (NONE, None)
    assert [(x.feature, x.error_code) for x in r.results] == [(TV, NONE)]
    for broker in (1, 2, 3):  # every broker follows the Raft state

        def advertised(broker: int = broker) -> bool:
            return finalized(cluster, broker).get(TV, 0) == level

        wait_for(advertised, what=f"broker {broker} to advertise {TV}={level}")


def test_api_versions_advertises_supported_and_finalized_features(cluster: LocalCluster) -> None:
    r = api_versions(cluster, 1)
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    assert supported == {TV: (0, 2), "group.version": (0, 1), "streams.version": (0, 1)}
    # as Kafka 4.4 bootstraps a new cluster
    assert finalized(cluster) == {TV: 2, "group.version": 1, "streams.version": 1}
    assert r.finalized_features_epoch >= 0
    # below v4 the features supported from level 0 are left out, as Kafka does (KAFKA-17492)
    assert api_versions(cluster, 1, 3).supported_features == ()


def test_update_features_rules_validate_only_and_all_or_nothing(cluster: LocalCluster) -> None:
    epoch = api_versions(cluster, 1).finalized_features_epoch
    # a downgrade needs a downgrade type; an unknown level or feature is refused; nothing moves
    for levels in (
        {TV: (1, UPGRADE)},
        {TV: (3, UPGRADE)},
        {"no.such.feature": (1, UPGRADE)},
        {TV: (1, SAFE_DOWNGRADE), "group.version": (5, UPGRADE)},
    ):
        r = update(cluster, levels)
        assert r.error_code == INVALID_UPDATE_VERSION, (levels, r)
        assert r.error_message.startswith(
            "The update failed for all features since the following feature had an error"
        )
        assert r.results == ()
    r = update(cluster, {TV: (1, SAFE_DOWNGRADE)}, validate_only=True)
    assert r.error_code == NONE
    assert [x.feature for x in r.results] == [TV]
    assert finalized(cluster)[TV] == 2
    assert api_versions(cluster, 1).finalized_features_epoch == epoch
    # v2 answers without per-feature results; v0's allow_downgrade is a safe downgrade
    r = update(cluster, {TV: (2, UPGRADE)}, version=2, validate_only=True)
    assert r.error_code == NONE
    assert not hasattr(r, "results")
    r = update(cluster, {TV: (1, SAFE_DOWNGRADE)}, version=0)
    assert r.error_code == NONE
    wait_for(lambda: finalized(cluster).get(TV) == 1, what="the v0 downgrade")
    set_level(cluster, 2, UPGRADE)
    assert api_versions(cluster, 1).finalized_features_epoch > epoch


def rafka(cluster: LocalCluster, *args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args, "-b", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_rafka_features_command(cluster: LocalCluster) -> None:
    out = rafka(cluster, "features")
    assert re.search(
        rf"Feature: {TV}\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+"
        r"FinalizedVersionLevel: 2",
        out,
    ), out
    assert "could be" in rafka(
        cluster, "features", "downgrade", "--feature", TV, "--version", "1", "--dry-run"
    )
    assert finalized(cluster)[TV] == 2
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster.cli",
            "features",
            "upgrade",
            "--feature",
            TV,
            "--version",
            "1",
            "-b",
            cluster.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1, bad.stderr
    assert "INVALID_UPDATE_VERSION" in bad.stderr, bad.stderr


def java_txn_versions(cluster: LocalCluster) -> dict[str, int]:
    """The highest version of each API the Java 4.3.0 client sent for one transaction."""
    ensure_setup()
    topic = f"tv-{uuid.uuid4().hex[:8]}"
    made = run_driver(
        "confluent",
        "create-topic",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    )
    assert made.returncode == 0, made.stderr[-2000:]
    res = run_driver(
        "java-4.3.0",
        "txn-produce",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--transactional-id",
        f"tv-{uuid.uuid4().hex[:8]}",
        "--count",
        "4",
        "--batches",
        "1",
        env={"RAFKA_CLIENT_LOG": "DEBUG"},
        timeout=180,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    sent = re.findall(
        r"Sending \w+ request with header RequestHeader\(apiKey=(\w+), apiVersion=(\d+)",
        res.stderr,
    )
    return {key: max(int(v) for k, v in sent if k == key) for key, _ in sent}


def test_downgraded_transaction_version_makes_kafka_4_clients_use_tv1(
    cluster: LocalCluster,
) -> None:
    set_level(cluster, 1, SAFE_DOWNGRADE)
    try:
        versions = java_txn_versions(cluster)
        assert versions["ADD_PARTITIONS_TO_TXN"] <= 4, versions
        assert versions["PRODUCE"] <= 11, versions
        assert versions["END_TXN"] <= 4, versions
    finally:
        set_level(cluster, 2, UPGRADE)
    versions = java_txn_versions(cluster)
    assert "ADD_PARTITIONS_TO_TXN" not in versions, versions
    assert versions["END_TXN"] >= 5, versions
