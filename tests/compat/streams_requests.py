"""StreamsGroupHeartbeat requests as a Kafka Streams member sends them, for the compat tests
(tests/compat/test_streams_groups.py, kafka_tools/test_streams_groups.py): a join with a
one-subtopology topology (a source topic, a store with a changelog), heartbeats and leaves."""

from __future__ import annotations

import datetime
from typing import Any

from cluster.kafka_client import builder

HEARTBEAT = 88
SOURCE = "compat-streams-source"
PROCESS = "7a2e0d5e-94b1-4bd4-8a0c-9c45c6a2c1a1"


def topology(version: int, group: str, source: str = SOURCE, **changes: Any) -> Any:
    """The topology: `source` into a store whose changelog is `<group>-store-changelog`
    (`changes`: changelog, changelog_partitions, sources)."""
    b = builder(HEARTBEAT, version)
    changelog = b.TopicInfo(
        name=changes.pop("changelog", f"{group}-store-changelog"),
        partitions=changes.pop("changelog_partitions", 0),
        replication_factor=0,
        topic_configs=(b.KeyValue(key="cleanup.policy", value="compact"),),
    )
    subtopology = b.Subtopology(
        subtopology_id="0",
        source_topics=changes.pop("sources", (source,)),
        source_topic_regex=(),
        state_changelog_topics=(changelog,),
        repartition_sink_topics=(),
        repartition_source_topics=(),
        copartition_groups=(),
    )
    return b.Topology(epoch=0, subtopologies=(subtopology,))


def heartbeat(
    group: str, member: str, epoch: int, version: int, source: str = SOURCE, **fields: Any
) -> dict:
    """StreamsGroupHeartbeat fields: a full join (epoch 0) unless `fields` say otherwise."""
    joining = epoch == 0
    values = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": -1,
        "instance_id": None,
        "rack_id": None,
        # v0 (kio) names it rebalance_timeout, v1 rebalance_timeout_ms; each version takes its own
        "rebalance_timeout": datetime.timedelta(milliseconds=300000 if joining else -1),
        "rebalance_timeout_ms": 300000 if joining else -1,
        "topology": topology(version, group, source) if joining else None,
        "active_tasks": () if joining else None,
        "standby_tasks": () if joining else None,
        "warmup_tasks": () if joining else None,
        "process_id": PROCESS if joining else None,
        "user_endpoint": None,
        "client_tags": () if joining else None,
        "task_offsets": None,
        "task_end_offsets": None,
        "shutdown_application": False,
    }
    return values | fields
