"""StreamsGroupHeartbeat (88) v0-v1: a member of a KIP-1071 streams group joins with its
topology, heartbeats, reconciles its tasks or leaves (dataplane/coordinator/streams/group.py).

As Kafka's KafkaApis.handleStreamsGroupHeartbeat: UNSUPPORTED_VERSION while the `streams.version`
feature is below 1; READ on the group (GROUP_AUTHORIZATION_FAILED); a topology naming an
internal topic (`__consumer_offsets`...) or an invalid topic name is STREAMS_INVALID_TOPOLOGY,
one naming a topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED. The group
coordinator answers once the records the heartbeat caused are replicated; then the internal
topics the topology lacks (repartition and changelog topics, with the partition counts the
coordinator decided and the topology's configs) are created, with CREATE on the cluster or on
each topic (else "Unauthorized to CREATE on topics ..." in the MISSING_INTERNAL_TOPICS status);
a failed creation is added to that status ("Creation failed: topic (ERROR)"), and the members'
next heartbeats see the topics. v1 (KIP-1331) adds TopologyDescriptionRequired, never set here:
no topology description plugin is configured (as Kafka's default).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from dataplane import features
from dataplane.coordinator.api import client_host
from dataplane.coordinator.streams.internal_topics import InternalTopic
from dataplane.coordinator.streams.requests import (
    HeartbeatRequest,
    HeartbeatResponse,
    Status,
    validate_heartbeat,
)
from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from dataplane.topic_admin import INTERNAL_TOPICS, NewTopic, valid_topic_name
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 88
VERSIONS = (0, 1)

log = logging.getLogger("rafka.coordinator.streams_group")
_MAX_ERRORS_SHOWN = 3  # as Kafka's status detail


def streams_enabled(ctx: RequestContext) -> bool:
    """Kafka's isStreamsGroupProtocolEnabled: the cluster finalized streams.version 1."""
    services = ctx.services
    level = features.level(
        services.cache, features.STREAMS_VERSION, services.config.transaction_version
    )
    return level >= 1


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    request = HeartbeatRequest.from_kio(req)
    try:
        if not streams_enabled(ctx):
            raise KafkaError(ErrorCode.unsupported_version)
        _authorize(ctx, request)
        validate_heartbeat(request)
        shard = ctx.services.group_coordinator.shard(request.group_id)
    except KafkaError as e:
        return HeartbeatResponse.error(e).to_kio(b, version)
    reply, result = shard.streams_group_heartbeat(
        request, ctx.header.client_id or "", client_host(ctx)
    )
    response = reply.value if reply.done else await reply.wait()
    if result is not None and result.to_create and response.error_code == 0:
        response = await _create_internal_topics(ctx, response, result.to_create)
    return response.to_kio(b, version)


def _authorize(ctx: RequestContext, request: HeartbeatRequest) -> None:
    authorizer = ctx.services.authorizer
    if not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.GROUP, request.group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)
    if request.topology is None:
        return
    names: dict[str, None] = {}
    for s in request.topology.subtopologies:
        names.update(dict.fromkeys(s.source_topics))
        names.update(dict.fromkeys(s.repartition_sink_topics))
        names.update(dict.fromkeys(t.name for t in s.repartition_source_topics))
        names.update(dict.fromkeys(t.name for t in s.state_changelog_topics))
    if internal := [n for n in names if n in INTERNAL_TOPICS]:
        raise KafkaError(
            ErrorCode.streams_invalid_topology,
            f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams topology is "
            "prohibited.",
        )
    if invalid := [n for n in names if not valid_topic_name(n)]:
        raise KafkaError(
            ErrorCode.streams_invalid_topology,
            f"Topic names {','.join(invalid)} are not valid topic names.",
        )
    if authorizer.denied(ctx.conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names):
        raise KafkaError(ErrorCode.topic_authorization_failed)


async def _create_internal_topics(
    ctx: RequestContext, response: HeartbeatResponse, topics: Sequence[InternalTopic]
) -> HeartbeatResponse:
    """Create the topology's missing internal topics; what kept one from being created goes
    into the MISSING_INTERNAL_TOPICS status, as Kafka's KafkaApis does."""
    authorizer = ctx.services.authorizer
    denied: frozenset[str] = frozenset()
    if not authorizer.authorize(
        ctx.conn, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        denied = authorizer.denied(
            ctx.conn, AclOperation.CREATE, ResourceType.TOPIC, (t.name for t in topics)
        )
    if denied:
        note = f"Unauthorized to CREATE on topics {', '.join(sorted(denied))}."
        return _with_status_note(response, note)
    results = await ctx.services.topic_admin.create_topics(
        [
            NewTopic(t.name, t.partitions, t.replication_factor or -1, configs=dict(t.configs))
            for t in topics
        ],
        validate_only=False,
    )
    failed = [
        (r.name, ErrorCode(r.error_code).name.upper())
        for r in results
        if r.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists)
    ]
    if not failed:
        log.info("streams group internal topics created: %s", ", ".join(t.name for t in topics))
        return response
    for name, error in failed:
        log.warning(
            "creating the streams internal topic %s failed: %s (the members' heartbeats report "
            "MISSING_INTERNAL_TOPICS until it exists: check the broker's topic settings and "
            "live brokers)",
            name,
            error,
        )
    shown = ", ".join(f"{name} ({error})" for name, error in failed[:_MAX_ERRORS_SHOWN])
    if len(failed) > _MAX_ERRORS_SHOWN:
        shown += f" and {len(failed) - _MAX_ERRORS_SHOWN} more"
    return _with_status_note(response, f"Creation failed: {shown}.")


def _with_status_note(response: HeartbeatResponse, note: str) -> HeartbeatResponse:
    """The response with `note` added to its MISSING_INTERNAL_TOPICS status (or as one)."""
    statuses = list(response.status)
    for i, (code, detail) in enumerate(statuses):
        if code == Status.MISSING_INTERNAL_TOPICS:
            statuses[i] = (code, f"{detail}; {note}")
            break
    else:
        statuses.append((int(Status.MISSING_INTERNAL_TOPICS), note))
    return dataclasses.replace(response, status=tuple(statuses))
