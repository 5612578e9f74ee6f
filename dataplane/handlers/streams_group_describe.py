"""StreamsGroupDescribe (89) v0-v1: the state, epochs, topology and members (with their current
and target tasks) of KIP-1071 streams groups this broker coordinates, as Kafka's
StreamsGroup.asDescribedGroup: the topology as configured against the cluster's topics (the
partition counts of its internal topics decided) once it is ready, else as the members sent
it; topics, subtopologies and tasks sorted.

UNSUPPORTED_VERSION while the `streams.version` feature is below 1; DESCRIBE on each group
(GROUP_AUTHORIZATION_FAILED) and on every topic of its topology (TOPIC_AUTHORIZATION_FAILED); an
empty id is INVALID_GROUP_ID; a group that does not exist, or is not a streams group,
GROUP_ID_NOT_FOUND. The answers come in Kafka's order: refused groups, empty ids, the others.
v1 (KIP-1331, KIP-1357): no topology description is stored (no plugin configured):
TopologyDescriptionStatus NOT_STORED (1) when asked for, else NOT_REQUESTED (0); AssignorName
"sticky".
"""

from __future__ import annotations

from typing import Any

from kio.static.protocol import Payload

from dataplane.coordinator.streams.group import StreamsGroup
from dataplane.coordinator.streams.member import Member, Tasks, TasksTuple
from dataplane.coordinator.streams.requests import TaskOffsets
from dataplane.coordinator.streams.topology import Subtopology, TopicInfo, required_topics
from dataplane.handlers.context import Request
from dataplane.handlers.streams_group_heartbeat import streams_enabled
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

API_KEY = 89
VERSIONS = (0, 1)

ASSIGNOR = "sticky"
NOT_REQUESTED, NOT_STORED = 0, 1
_TOPICS_DENIED = "The described group uses topics that the client is not authorized to describe."


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if not streams_enabled(ctx):
        error = KafkaError(ErrorCode.unsupported_version)
        groups = tuple(_failed(b, group_id, error) for group_id in req.group_ids)
        return b.StreamsGroupDescribeResponse(throttle_time=0, groups=groups)
    coordinator, authorizer = ctx.services.group_coordinator, ctx.services.authorizer
    status = NOT_STORED if getattr(req, "include_topology_description", False) else NOT_REQUESTED
    # Kafka's order: the unauthorized groups, then the empty ids, then the described ones
    refused, invalid, described = [], [], []
    for group_id in req.group_ids:
        if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(_failed(b, group_id, KafkaError(ErrorCode.group_authorization_failed)))
            continue
        if not group_id:
            invalid.append(_failed(b, group_id, KafkaError(ErrorCode.invalid_group_id)))
            continue
        try:
            (found,) = coordinator.shard(group_id).streams_group_describe([group_id])
            if isinstance(found, KafkaError):
                raise found
            if found.topology is not None and authorizer.denied(
                ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, required_topics(found.topology)
            ):
                raise KafkaError(ErrorCode.topic_authorization_failed, _TOPICS_DENIED)
        except KafkaError as e:
            described.append(_failed(b, group_id, e))
            continue
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if req.include_authorized_operations:
            operations = authorizer.authorized_operations(ctx.conn, ResourceType.GROUP, group_id)
        described.append(_described(b, found, operations, status))
    groups = (*refused, *invalid, *described)
    return b.StreamsGroupDescribeResponse(throttle_time=0, groups=groups)


def _failed(b: EntityBuilder, group_id: str, e: KafkaError) -> Payload:
    return b.DescribedGroup(
        error_code=e.code,
        error_message=e.message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        topology=None,
        members=(),
    )


def _described(b: EntityBuilder, group: StreamsGroup, operations: int, status: int) -> Payload:
    return b.DescribedGroup(
        error_code=ErrorCode.none,
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology=_topology(b, group),
        members=tuple(
            _member(b, m, group.target.get(m.member_id), group.task_offsets.get(m.member_id))
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ),
        authorized_operations=operations,
        topology_description_status=status,
        assignor_name=ASSIGNOR,
    )


def _topology(b: EntityBuilder, group: StreamsGroup) -> Payload | None:
    configured, topology = group.configured, group.topology
    if topology is None:
        return None

    def info(name: str, partitions: int, rf: int, configs: Any) -> Payload:
        kvs = tuple(b.KeyValue(key=k, value=v) for k, v in configs)
        return b.TopicInfo(
            name=name, partitions=partitions, replication_factor=rf, topic_configs=kvs
        )

    subtopologies = []
    if configured is not None and configured.ready and configured.subtopologies is not None:
        for sid, c in sorted(configured.subtopologies.items()):
            subtopologies.append(
                b.Subtopology(
                    subtopology_id=sid,
                    source_topics=tuple(sorted(c.source_topics)),
                    repartition_sink_topics=tuple(sorted(c.repartition_sink_topics)),
                    state_changelog_topics=tuple(
                        info(t.name, t.partitions, t.replication_factor or 0, t.configs)
                        for t in sorted(c.state_changelog_topics, key=lambda t: t.name)
                    ),
                    repartition_source_topics=tuple(
                        info(t.name, t.partitions, t.replication_factor or 0, t.configs)
                        for t in sorted(c.repartition_source_topics, key=lambda t: t.name)
                    ),
                )
            )
    else:

        def recorded(t: TopicInfo) -> Payload:
            configs = ((c.key, c.value) for c in t.topic_configs)
            return info(t.name, t.partitions, t.replication_factor, configs)

        s: Subtopology
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            subtopologies.append(
                b.Subtopology(
                    subtopology_id=s.subtopology_id,
                    source_topics=tuple(sorted(s.source_topics)),
                    repartition_sink_topics=tuple(sorted(s.repartition_sink_topics)),
                    state_changelog_topics=tuple(
                        recorded(t) for t in sorted(s.state_changelog_topics, key=lambda t: t.name)
                    ),
                    repartition_source_topics=tuple(
                        recorded(t)
                        for t in sorted(s.repartition_source_topics, key=lambda t: t.name)
                    ),
                )
            )
    return b.Topology(epoch=topology.epoch, subtopologies=tuple(subtopologies))


def _member(
    b: EntityBuilder,
    m: Member,
    target: TasksTuple | None,
    offsets: tuple[TaskOffsets, TaskOffsets] | None,
) -> Payload:
    def ids(tasks: Tasks) -> tuple[Payload, ...]:
        return tuple(
            b.TaskIds(subtopology_id=s, partitions=tuple(sorted(tasks[s]))) for s in sorted(tasks)
        )

    def assignment(tasks: TasksTuple | None) -> Payload:
        if tasks is None:
            return b.Assignment(active_tasks=(), standby_tasks=(), warmup_tasks=())
        return b.Assignment(
            active_tasks=ids(tasks.active),
            standby_tasks=ids(tasks.standby),
            warmup_tasks=ids(tasks.warmup),
        )

    def task_offsets(reported: TaskOffsets) -> tuple[Payload, ...]:
        return tuple(b.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in reported)

    current = TasksTuple(m.assigned.active_tasks(), m.assigned.standby, m.assigned.warmup)
    endpoint = m.user_endpoint
    return b.Member(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        topology_epoch=m.topology_epoch,
        process_id=m.process_id,
        user_endpoint=None if endpoint is None else b.Endpoint(host=endpoint[0], port=endpoint[1]),
        client_tags=tuple(b.KeyValue(key=k, value=v) for k, v in m.client_tags),
        task_offsets=task_offsets(offsets[0] if offsets else ()),
        task_end_offsets=task_offsets(offsets[1] if offsets else ()),
        assignment=assignment(current),
        target_assignment=assignment(target),
        is_classic=False,
    )
