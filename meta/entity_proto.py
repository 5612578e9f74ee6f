"""Conversions between the metadata entities (``meta.model``, ``meta.acl``, the outcomes of
``meta.commands``) and their protobuf messages: those of ``proto/metadata_entities.proto``,
which the gRPC API (``meta.wire``) and the stored records (``meta.records``,
``meta.command_records``) share, and each side's own form of a broker. One converter per
message, so the API and the records cannot drift apart; ``meta.records`` says how records may
change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Literal

from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_code,
)
from meta.commands import AclDeleteOutcome, IsrOutcome
from meta.model import (
    Broker,
    ConfigAlteration,
    DelegationToken,
    Endpoint,
    Partition,
    ScramCredential,
    Topic,
)
from meta.protocol import ErrorCode
from proto import meta_pb2
from proto import metadata_entities_pb2 as pb
from proto import metadata_records_pb2 as records_pb2

# (topic, partition, target replicas): None cancels the reassignment in progress.
Reassignment = tuple[str, int, tuple[int, ...] | None]


def configs_to_proto(configs: Mapping[str, str]) -> list[pb.Config]:
    return [pb.Config(name=name, value=value) for name, value in configs.items()]


def configs_from_proto(messages: Iterable[pb.Config]) -> dict[str, str]:
    return {config.name: config.value for config in messages}


def partition_to_proto(partition: Partition) -> pb.Partition:
    return pb.Partition(
        index=partition.index,
        replicas=partition.replicas,
        isr=partition.isr,
        leader=partition.leader,
        leader_epoch=partition.leader_epoch,
        partition_epoch=partition.partition_epoch,
        adding_replicas=partition.adding_replicas,
        removing_replicas=partition.removing_replicas,
    )


def partition_from_proto(p: pb.Partition) -> Partition:
    return Partition(
        p.index,
        tuple(p.replicas),
        tuple(p.isr),
        p.leader,
        p.leader_epoch,
        p.partition_epoch,
        tuple(p.adding_replicas),
        tuple(p.removing_replicas),
    )


def topic_to_proto(topic: Topic) -> pb.Topic:
    return pb.Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=[partition_to_proto(p) for p in topic.partitions],
        configs=configs_to_proto(topic.configs),
        internal=topic.internal,
    )


def topic_from_proto(t: pb.Topic) -> Topic:
    partitions = tuple(partition_from_proto(p) for p in t.partitions)
    return Topic(t.name, t.topic_id, partitions, configs_from_proto(t.configs), t.internal)


def assignments_to_proto(
    assignments: Iterable[tuple[int, Sequence[int]]],
) -> list[pb.ReplicaAssignment]:
    return [
        pb.ReplicaAssignment(partition_index=index, broker_ids=brokers)
        for index, brokers in assignments
    ]


def assignments_from_proto(
    messages: Iterable[pb.ReplicaAssignment],
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    return tuple((a.partition_index, tuple(a.broker_ids)) for a in messages)


def endpoint_to_proto(e: Endpoint) -> pb.Endpoint:
    return pb.Endpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)


def endpoint_from_proto(e: pb.Endpoint) -> Endpoint:
    return Endpoint(e.name, e.host, e.port, e.security_protocol)


def broker_to_proto(broker: Broker) -> meta_pb2.Broker:
    """The gRPC API's form of a broker (without its incarnation id)."""
    return meta_pb2.Broker(
        id=broker.id,
        host=broker.host,
        port=broker.port,
        rack=broker.rack or "",
        fenced=broker.fenced,
        epoch=broker.epoch,
        replication_endpoint=broker.replication_endpoint,
        in_controlled_shutdown=broker.in_controlled_shutdown,
        endpoints=[endpoint_to_proto(e) for e in broker.endpoints],
    )


def registration_to_proto(broker: Broker) -> records_pb2.BrokerRegistration:
    """The stored form of a broker."""
    return records_pb2.BrokerRegistration(
        id=broker.id,
        host=broker.host,
        port=broker.port,
        rack=broker.rack,  # None leaves the optional field absent
        replication_endpoint=broker.replication_endpoint,
        incarnation_id=broker.incarnation_id,
        epoch=broker.epoch,
        fenced=broker.fenced,
        in_controlled_shutdown=broker.in_controlled_shutdown,
        endpoints=[endpoint_to_proto(e) for e in broker.endpoints],
    )


def registration_from_proto(r: records_pb2.BrokerRegistration) -> Broker:
    return Broker(
        r.id,
        r.host,
        r.port,
        r.rack if r.HasField("rack") else None,
        r.replication_endpoint,
        r.incarnation_id,
        r.epoch,
        r.fenced,
        r.in_controlled_shutdown,
        tuple(endpoint_from_proto(e) for e in r.endpoints),
    )


def acl_to_proto(b: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=b.resource_type,
        resource_name=b.resource_name,
        pattern_type=b.pattern_type,
        principal=b.principal,
        host=b.host,
        operation=b.operation,
        permission_type=b.permission_type,
    )


def acl_from_proto(b: pb.AclBinding) -> AclBinding:
    """A code Kafka does not define decodes as UNKNOWN (``enum_code``), which validation
    refuses; stored bindings hold only codes that passed it."""
    return AclBinding(
        enum_code(ResourceType, b.resource_type),
        b.resource_name,
        enum_code(PatternType, b.pattern_type),
        b.principal,
        b.host,
        enum_code(AclOperation, b.operation),
        enum_code(AclPermissionType, b.permission_type),
    )


def acl_filter_to_proto(f: AclBindingFilter) -> pb.AclBindingFilter:
    return pb.AclBindingFilter(  # None leaves an optional field absent
        resource_type=f.resource_type,
        resource_name=f.resource_name,
        pattern_type=f.pattern_type,
        principal=f.principal,
        host=f.host,
        operation=f.operation,
        permission_type=f.permission_type,
    )


def acl_filter_from_proto(f: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        enum_code(ResourceType, f.resource_type),
        f.resource_name if f.HasField("resource_name") else None,
        enum_code(PatternType, f.pattern_type),
        f.principal if f.HasField("principal") else None,
        f.host if f.HasField("host") else None,
        enum_code(AclOperation, f.operation),
        enum_code(AclPermissionType, f.permission_type),
    )


def acl_delete_outcome_to_proto(o: AclDeleteOutcome) -> pb.AclDeleteOutcome:
    return pb.AclDeleteOutcome(
        error_code=o.error_code,
        error_message=o.error_message,
        deleted=[acl_to_proto(b) for b in o.deleted],
    )


def acl_delete_outcome_from_proto(o: pb.AclDeleteOutcome) -> AclDeleteOutcome:
    deleted = tuple(acl_from_proto(b) for b in o.deleted)
    return AclDeleteOutcome(ErrorCode(o.error_code), o.error_message, deleted)


def scram_to_proto(user: str, mechanism: str, c: ScramCredential) -> pb.ScramCredential:
    return pb.ScramCredential(
        user=user,
        mechanism=mechanism,
        salt=c.salt,
        stored_key=c.stored_key,
        server_key=c.server_key,
        iterations=c.iterations,
    )


def scram_from_proto(c: pb.ScramCredential) -> ScramCredential:
    """The credential of ``c.user`` for ``c.mechanism``."""
    return ScramCredential(c.salt, c.stored_key, c.server_key, c.iterations)


def token_to_proto(t: DelegationToken) -> pb.DelegationToken:
    return pb.DelegationToken(**{f.name: getattr(t, f.name) for f in fields(DelegationToken)})


def token_from_proto(t: pb.DelegationToken) -> DelegationToken:
    values = {f.name: getattr(t, f.name) for f in fields(DelegationToken)}
    return DelegationToken(**values | {"renewers": tuple(t.renewers)})


def groups_to_proto(groups: Iterable[tuple[str, int]]) -> list[pb.GroupEntry]:
    return [pb.GroupEntry(group_id=g, coordinator_partition=p) for g, p in groups]


def groups_from_proto(messages: Iterable[pb.GroupEntry]) -> tuple[tuple[str, int], ...]:
    return tuple((g.group_id, g.coordinator_partition) for g in messages)


def features_to_proto(features: Iterable[tuple[str, int]]) -> list[records_pb2.FeatureLevel]:
    return [records_pb2.FeatureLevel(name=name, level=level) for name, level in features]


def features_from_proto(
    messages: Iterable[records_pb2.FeatureLevel],
) -> tuple[tuple[str, int], ...]:
    return tuple((f.name, f.level) for f in messages)


def feature_update_to_proto(update: tuple[str, int, int]) -> pb.FeatureUpdate:
    """(feature, max version level, Kafka's upgrade type) as a FeatureUpdate."""
    feature, level, upgrade_type = update
    return pb.FeatureUpdate(feature=feature, max_version_level=level, upgrade_type=upgrade_type)


def feature_update_from_proto(u: pb.FeatureUpdate) -> tuple[str, int, int]:
    return u.feature, u.max_version_level, u.upgrade_type


def isr_outcome_to_proto(o: IsrOutcome) -> pb.IsrOutcome:
    return pb.IsrOutcome(
        topic_id=o.topic_id,
        partition_index=o.partition_index,
        error_code=o.error_code,
        error_message=o.error_message,
        partition=None if o.partition is None else partition_to_proto(o.partition),
    )


def isr_outcome_from_proto(o: pb.IsrOutcome) -> IsrOutcome:
    partition = partition_from_proto(o.partition) if o.HasField("partition") else None
    return IsrOutcome(
        o.topic_id, o.partition_index, ErrorCode(o.error_code), o.error_message, partition
    )


def reassignment_to_proto(r: tuple[str, int, Sequence[int] | None]) -> pb.Reassignment:
    topic, index, target = r
    return pb.Reassignment(topic=topic, partition=index, cancel=target is None, replicas=target)


def reassignment_from_proto(r: pb.Reassignment) -> Reassignment:
    return r.topic, r.partition, None if r.cancel else tuple(r.replicas)


def config_alteration_to_proto(a: ConfigAlteration) -> pb.ConfigAlteration:
    return pb.ConfigAlteration(
        resource_type=a.resource_type,
        name=a.name,
        set_configs=configs_to_proto(a.set),
        delete_configs=a.delete,
        replace=a.replace,
    )


def config_alteration_from_proto(a: pb.ConfigAlteration) -> ConfigAlteration:
    """Raises ValueError for a resource type other than "topic" and "broker"."""
    if a.resource_type not in ("topic", "broker"):
        raise ValueError(f"unknown config resource type {a.resource_type!r}")
    resource_type: Literal["topic", "broker"] = "topic" if a.resource_type == "topic" else "broker"
    configs = configs_from_proto(a.set_configs)
    return ConfigAlteration(resource_type, a.name, configs, tuple(a.delete_configs), a.replace)
