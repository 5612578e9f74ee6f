"""Request and response schemas of API versions kio (0.6.5) does not have: the ones Kafka 4
removed (KIP-896: OffsetCommit v0-v1, OffsetFetch v0, DescribeConfigs v0, AlterReplicaLogDirs v0
and DescribeLogDirs v0); and the ones Kafka 4.4 added after kio's messages: DeleteGroups v3 (a
per-group error message), ApiVersions v5 (KIP-1242's cluster and node id check),
TxnOffsetCommit v6 (topic ids, KIP-1319), the streams group APIs' new versions (KIP-1331,
KIP-1357): StreamsGroupHeartbeat v1, StreamsGroupDescribe v1, and two whole APIs kio lacks:
StreamsGroupTopologyDescriptionUpdate (93) v0 and UnregisterController (94) v0 (KIP-1312).

`codec.entity_class` falls back on `SCHEMAS` (api key, version) -> {request|response: path}.
A version whose layout Kafka's JSON declares identical to a later one kio has reuses kio's
classes (OffsetCommitResponse: "Versions 1 and 2 are the same as version 0"; OffsetFetch v0
differs from v1 only in where 0.8.1 brokers kept the offsets); the OffsetCommitRequest v0 and
v1 modules, the DescribeConfigs v0, DeleteGroups v3, ApiVersions v5, TxnOffsetCommit v6,
streams group and UnregisterController v0 ones here are generated in kio's form by `python -m
proto.generate_records` from Kafka's JSON messages (vendored in proto/kafka-message-specs).
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.static.constants import EntityType

_OWN = __name__  # the modules of this package

SCHEMAS: Mapping[tuple[int, int], Mapping[EntityType, str]] = {
    (8, 0): {
        EntityType.request: f"{_OWN}.offset_commit_v0_request:OffsetCommitRequest",
        EntityType.response: "kio.schema.offset_commit.v2.response:OffsetCommitResponse",
    },
    (8, 1): {
        EntityType.request: f"{_OWN}.offset_commit_v1_request:OffsetCommitRequest",
        EntityType.response: "kio.schema.offset_commit.v2.response:OffsetCommitResponse",
    },
    (9, 0): {
        EntityType.request: "kio.schema.offset_fetch.v1.request:OffsetFetchRequest",
        EntityType.response: "kio.schema.offset_fetch.v1.response:OffsetFetchResponse",
    },
    (32, 0): {
        EntityType.request: f"{_OWN}.describe_configs_v0_request:DescribeConfigsRequest",
        EntityType.response: f"{_OWN}.describe_configs_v0_response:DescribeConfigsResponse",
    },
    (28, 6): {
        EntityType.request: f"{_OWN}.txn_offset_commit_v6_request:TxnOffsetCommitRequest",
        EntityType.response: f"{_OWN}.txn_offset_commit_v6_response:TxnOffsetCommitResponse",
    },
    # "Version 1 is the same as version 0" (AlterReplicaLogDirs and DescribeLogDirs, both ways)
    (34, 0): {
        EntityType.request: (
            "kio.schema.alter_replica_log_dirs.v1.request:AlterReplicaLogDirsRequest"
        ),
        EntityType.response: (
            "kio.schema.alter_replica_log_dirs.v1.response:AlterReplicaLogDirsResponse"
        ),
    },
    (35, 0): {
        EntityType.request: "kio.schema.describe_log_dirs.v1.request:DescribeLogDirsRequest",
        EntityType.response: "kio.schema.describe_log_dirs.v1.response:DescribeLogDirsResponse",
    },
    (18, 5): {
        EntityType.request: f"{_OWN}.api_versions_v5_request:ApiVersionsRequest",
        EntityType.response: f"{_OWN}.api_versions_v5_response:ApiVersionsResponse",
    },
    (88, 1): {
        EntityType.request: (
            f"{_OWN}.streams_group_heartbeat_v1_request:StreamsGroupHeartbeatRequest"
        ),
        EntityType.response: (
            f"{_OWN}.streams_group_heartbeat_v1_response:StreamsGroupHeartbeatResponse"
        ),
    },
    (89, 1): {
        EntityType.request: f"{_OWN}.streams_group_describe_v1_request:StreamsGroupDescribeRequest",
        EntityType.response: (
            f"{_OWN}.streams_group_describe_v1_response:StreamsGroupDescribeResponse"
        ),
    },
    (93, 0): {
        EntityType.request: (
            f"{_OWN}.streams_group_topology_description_update_v0_request"
            ":StreamsGroupTopologyDescriptionUpdateRequest"
        ),
        EntityType.response: (
            f"{_OWN}.streams_group_topology_description_update_v0_response"
            ":StreamsGroupTopologyDescriptionUpdateResponse"
        ),
    },
    (42, 3): {
        EntityType.request: f"{_OWN}.delete_groups_v3_request:DeleteGroupsRequest",
        EntityType.response: f"{_OWN}.delete_groups_v3_response:DeleteGroupsResponse",
    },
    (94, 0): {
        EntityType.request: (
            f"{_OWN}.unregister_controller_v0_request:UnregisterControllerRequest"
        ),
        EntityType.response: (
            f"{_OWN}.unregister_controller_v0_response:UnregisterControllerResponse"
        ),
    },
}
