"""ConsumerGroupHeartbeat and ConsumerGroupDescribe as plain values: conversion from and to
kio's request and response classes, and Kafka's validation of a heartbeat request."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from kio.static.protocol import Payload

from dataplane.coordinator.consumer.member import (
    CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    OwnedPartitions,
)
from dataplane.protocol.codec import EntityBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED

# -- requests and responses ------------------------------------------------------------------


def _ms(value: Any) -> int:
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    return int(value)


def _topic_id(value: Any) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if value is None:
        return bytes(16)
    return bytes(value)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat v0-v1 request fields, as plain values (topic ids are 16 bytes;
    None = "not sent / unchanged", as in the schema)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: OwnedPartitions | None = None

    @classmethod
    def from_kio(cls, req: Any) -> HeartbeatRequest:
        """From kio's ConsumerGroupHeartbeatRequest (v0 has no subscribed_topic_regex)."""
        owned = req.topic_partitions
        return cls(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=_ms(req.rebalance_timeout),
            subscribed_topic_names=(
                None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names)
            ),
            subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
            server_assignor=req.server_assignor,
            topic_partitions=(
                None
                if owned is None
                else tuple((_topic_id(tp.topic_id), tuple(tp.partitions)) for tp in owned)
            ),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """ConsumerGroupHeartbeat response fields. `assignment` is None when not sent (the member
    keeps its last one), else ((topic id, partitions), ...)."""

    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[tuple[bytes, tuple[int, ...]], ...] | None = None
    error_code: int = 0
    error_message: str | None = None

    @classmethod
    def error(cls, exc: KafkaError) -> HeartbeatResponse:
        """The response Kafka sends for a failed heartbeat."""
        return cls(None, 0, 0, None, int(exc.code), exc.message)

    def to_kio(self, b: EntityBuilder) -> Payload:
        """The kio response, built with `dataplane.protocol.codec.ResponseBuilder(68, v)`."""
        assignment = None
        if self.assignment is not None:
            assignment = b.Assignment(
                topic_partitions=tuple(
                    b.TopicPartitions(topic_id=t, partitions=p) for t, p in self.assignment
                )
            )
        return b.ConsumerGroupHeartbeatResponse(
            throttle_time=0,
            error_code=self.error_code,
            error_message=self.error_message,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            heartbeat_interval=self.heartbeat_interval_ms,
            assignment=assignment,
        )


Record = tuple[bytes, bytes | None]


class HeartbeatResult(NamedTuple):
    response: HeartbeatResponse
    records: list[Record]


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: bytes
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1
    """v1+: 1 = consumer protocol member (0 classic, -1 unknown)."""


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """One ConsumerGroupDescribe v0-v1 `DescribedGroup`."""

    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[DescribedMember, ...]
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    error_code: int = 0
    error_message: str | None = None

    def to_kio(self, b: EntityBuilder) -> Payload:
        """The kio DescribedGroup, built with `ResponseBuilder(69, v)` (v0 drops member_type)."""

        def assignment(tps: tuple[DescribedTopicPartitions, ...]) -> Payload:
            return b.Assignment(
                topic_partitions=tuple(
                    b.TopicPartitions(
                        topic_id=tp.topic_id, topic_name=tp.topic_name, partitions=tp.partitions
                    )
                    for tp in tps
                )
            )

        return b.DescribedGroup(
            error_code=self.error_code,
            error_message=self.error_message,
            group_id=self.group_id,
            group_state=self.group_state,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self.assignor_name,
            members=tuple(
                b.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=assignment(m.assignment),
                    target_assignment=assignment(m.target_assignment),
                    member_type=m.member_type,
                )
                for m in self.members
            ),
            authorized_operations=self.authorized_operations,
        )


# -- validation ------------------------------------------------------------------------------


def invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat_request(
    req: HeartbeatRequest,
    api_version: int,
    assignors: Sequence[str] = ("uniform", "range"),
) -> None:
    """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (done by `heartbeat` too; the
    coordinator service runs it before routing the request)."""
    if (
        api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
        or req.member_epoch > 0
        or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
    ) and (req.member_id is None or not req.member_id.strip()):
        raise invalid_request("MemberId can't be empty.")
    if req.group_id is None or not req.group_id.strip():
        raise invalid_request("GroupId can't be empty.")
    if _blank(req.instance_id):
        raise invalid_request("InstanceId can't be empty.")
    if _blank(req.rack_id):
        raise invalid_request("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or len(req.topic_partitions) > 0:
            raise invalid_request("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid_request(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                "(re-)joining."
            )
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid_request("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise KafkaError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )
