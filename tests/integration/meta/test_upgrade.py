"""A meta node started on a data dir written before the metadata records (pickled commands and
state) serves it, and keeps serving after a restart in the new format."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from meta.entity_proto import configs_from_proto
from tests.unit.meta.test_upgrade import FIXTURE

from .harness import MetaNodes, eventually, leader_id, watching

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_a_pickled_data_dir_starts_and_serves(tmp_path: Path, meta_nodes_factory) -> None:
    shutil.copytree(FIXTURE, tmp_path / "meta-1")
    nodes: MetaNodes = meta_nodes_factory(1)
    for restart in (False, True):
        nodes.start_all()
        async with nodes.client() as client:
            await leader_id(client)
            async with watching(client) as watched:
                await eventually(lambda: bool(watched.topics), what="a snapshot")
                assert watched.cluster_id == "pickled-cluster-id"
                assert sorted(watched.topics) == ["__internal", "orders"]
                configs = configs_from_proto(watched.topics["orders"].configs)
                assert configs["cleanup.policy"] == "compact"
                assert sorted(watched.brokers) == [1, 2, 3]
            if not restart:
                assert await client.list_groups() == [("g1", 3)]
                assert await client.register_groups([("g5", 0)]) == 1
            else:
                assert await client.list_groups() == [("g1", 3), ("g5", 0)]
        nodes.stop_all()
