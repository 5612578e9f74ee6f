"""StreamsGroupHeartbeat and StreamsGroupDescribe as plain values: conversion from and to kio's
classes (v0 from kio, v1 from `dataplane.protocol.legacy`), and Kafka's validation of a
heartbeat (GroupCoordinatorService's `throwIfStreamsGroupHeartbeatRequestIsInvalid` and
`...IsUsingUnsupportedFeatures`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import IntEnum
from typing import Any

from kio.static.protocol import Payload

from dataplane.coordinator.streams.member import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    TasksTuple,
)
from dataplane.coordinator.streams.topology import validate_request_topology
from dataplane.protocol.codec import EntityBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError


def invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _tasks(ids: Any) -> dict[str, frozenset[int]] | None:
    if ids is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for t in ids:
        if t.partitions:
            out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(
                int(p) for p in t.partitions
            )
    return out


TaskOffsets = tuple[tuple[str, int, int], ...]
"""Cumulative changelog offsets a member reports: ((subtopology, partition, offset), ...)."""


def _offsets(offsets: Any) -> TaskOffsets | None:
    if offsets is None:
        return None
    return tuple(sorted((o.subtopology_id, int(o.partition), int(o.offset)) for o in offsets))


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """StreamsGroupHeartbeat v0-v1 (None: not sent / unchanged, as in the schema). `topology`
    is kio's Topology; the task lists are the member's owned tasks."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Any = None
    active_tasks: dict[str, frozenset[int]] | None = None
    standby_tasks: dict[str, frozenset[int]] | None = None
    warmup_tasks: dict[str, frozenset[int]] | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: TaskOffsets | None = None
    task_end_offsets: TaskOffsets | None = None
    shutdown_application: bool = False

    @classmethod
    def from_kio(cls, req: Any) -> HeartbeatRequest:
        # kio's v0 has a timedelta `rebalance_timeout`, the generated v1 `rebalance_timeout_ms`
        rebalance = getattr(req, "rebalance_timeout", None)
        if rebalance is None:
            rebalance = req.rebalance_timeout_ms
        endpoint = req.user_endpoint
        return cls(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            endpoint_information_epoch=int(req.endpoint_information_epoch),
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=(
                rebalance // timedelta(milliseconds=1)
                if isinstance(rebalance, timedelta)
                else int(rebalance)
            ),
            topology=req.topology,
            active_tasks=_tasks(req.active_tasks),
            standby_tasks=_tasks(req.standby_tasks),
            warmup_tasks=_tasks(req.warmup_tasks),
            process_id=req.process_id,
            user_endpoint=None if endpoint is None else (endpoint.host, int(endpoint.port)),
            client_tags=(
                None
                if req.client_tags is None
                else tuple(sorted((kv.key, kv.value) for kv in req.client_tags))
            ),
            task_offsets=_offsets(req.task_offsets),
            task_end_offsets=_offsets(req.task_end_offsets),
            shutdown_application=bool(req.shutdown_application),
        )

    def owned(self) -> TasksTuple | None:
        """The tasks the member reports owning (None: not reported)."""
        if self.active_tasks is None:
            return None
        return TasksTuple(self.active_tasks, self.standby_tasks or {}, self.warmup_tasks or {})


def validate_heartbeat(req: HeartbeatRequest) -> None:  # noqa: C901 - Kafka's checks, in its order
    """INVALID_REQUEST / STREAMS_INVALID_TOPOLOGY for what Kafka refuses before the group is
    looked at."""
    # Kafka 4.4's broker does not support these yet
    if req.warmup_tasks:
        raise invalid_request("WarmupTasks are not supported yet.")
    if req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies):
        raise invalid_request("Regular expressions for source topics are not supported yet.")
    if req.member_id == "":
        raise invalid_request("MemberId can't be empty.")
    if req.group_id == "":
        raise invalid_request("GroupId can't be empty.")
    if req.instance_id == "":
        raise invalid_request("InstanceId can't be empty.")
    if req.rack_id == "":
        raise invalid_request("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        for name, tasks in (
            ("ActiveTasks", req.active_tasks),
            ("StandbyTasks", req.standby_tasks),
            ("WarmupTasks", req.warmup_tasks),
        ):
            if tasks:
                raise invalid_request(f"{name} must be empty when (re-)joining.")
        if req.topology is None:
            raise invalid_request("Topology must be non-null when (re-)joining.")
        validate_request_topology(req.topology)
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid_request(
            f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
        )
    kinds = (req.active_tasks, req.standby_tasks, req.warmup_tasks)
    if any(k is not None for k in kinds) and any(k is None for k in kinds):
        raise invalid_request("If one task-type is non-null, all must be non-null.")
    if req.member_epoch != 0 and req.topology is not None:
        raise invalid_request("Topology can only be provided when (re-)joining.")


class Status(IntEnum):
    """StreamsGroupHeartbeatResponse's status codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True, slots=True)
class EndpointPartitions:
    """PartitionsByUserEndpoint's entry: a member's endpoint and the source partitions of its
    active and of its standby/warm-up tasks, ((topic, partitions), ...)."""

    endpoint: tuple[str, int]
    active: tuple[tuple[str, tuple[int, ...]], ...]
    standby: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int = 0
    tasks: TasksTuple | None = None  # None: not sent (unchanged)
    status: tuple[tuple[int, str], ...] = ()
    endpoint_information_epoch: int = 0
    partitions_by_user_endpoint: tuple[EndpointPartitions, ...] | None = None
    # Kafka's acceptable.recovery.lag and task offset interval defaults, sent with a heartbeat's
    # answer (a leave's and an error's carry the schema's defaults)
    acceptable_recovery_lag: int = -1
    task_offset_interval_ms: int = 0
    error_code: int = 0
    error_message: str | None = None

    @classmethod
    def error(cls, exc: KafkaError) -> HeartbeatResponse:
        return cls(None, 0, error_code=int(exc.code), error_message=exc.message)

    def to_kio(self, b: EntityBuilder, version: int) -> Payload:
        """The kio response, built with `ResponseBuilder(88, version)`. v0's
        AcceptableRecoveryLag (int32, "Legacy" since v1 made it int64) is left 0, as Kafka 4.4
        leaves it."""

        def ids(tasks: Any) -> tuple[Any, ...]:
            return tuple(
                b.TaskIds(subtopology_id=s, partitions=tuple(sorted(tasks[s])))
                for s in sorted(tasks)
            )

        def partitions(pairs: Any) -> tuple[Any, ...]:
            return tuple(b.TopicPartition(topic=t, partitions=ps) for t, ps in pairs)

        t = self.tasks
        endpoints = None
        if self.partitions_by_user_endpoint is not None:
            endpoints = tuple(
                b.EndpointToPartitions(
                    user_endpoint=b.Endpoint(host=e.endpoint[0], port=e.endpoint[1]),
                    active_partitions=partitions(e.active),
                    standby_partitions=partitions(e.standby),
                )
                for e in self.partitions_by_user_endpoint
            )
        return b.StreamsGroupHeartbeatResponse(
            throttle_time=0,
            error_code=self.error_code,
            error_message=self.error_message,
            member_id=self.member_id or "",
            member_epoch=self.member_epoch,
            heartbeat_interval=self.heartbeat_interval_ms,
            acceptable_recovery_lag=self.acceptable_recovery_lag if version >= 1 else 0,
            task_offset_interval=self.task_offset_interval_ms,
            status=tuple(b.Status(status_code=c, status_detail=d) for c, d in self.status),
            active_tasks=None if t is None else ids(t.active),
            standby_tasks=None if t is None else ids(t.standby),
            warmup_tasks=None if t is None else ids(t.warmup),
            endpoint_information_epoch=self.endpoint_information_epoch,
            partitions_by_user_endpoint=endpoints,
        )


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    response: HeartbeatResponse
    records: list[tuple[bytes, bytes | None]]
    to_create: Sequence[Any] = field(default_factory=tuple)  # internal_topics.InternalTopic
