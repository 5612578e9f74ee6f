"""The records of metadata entities (``proto/metadata_records.proto``): topics and their
partitions, brokers and their endpoints, ACL bindings and filters, SCRAM credentials, feature
levels, group entries and configs, as both command records (``meta.command_records``) and the
state record (``meta.records``) hold them. ``meta.records`` says how records may change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from meta.model import Broker, Endpoint, Partition, ScramCredential, Topic
from proto import metadata_records_pb2 as pb


def config_records(configs: Mapping[str, str]) -> list[pb.Config]:
    return [pb.Config(name=name, value=value) for name, value in configs.items()]


def configs_from(records: Iterable[pb.Config]) -> dict[str, str]:
    return {config.name: config.value for config in records}


def partition_record(partition: Partition) -> pb.Partition:
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


def partition_from(r: pb.Partition) -> Partition:
    return Partition(
        r.index,
        tuple(r.replicas),
        tuple(r.isr),
        r.leader,
        r.leader_epoch,
        r.partition_epoch,
        tuple(r.adding_replicas),
        tuple(r.removing_replicas),
    )


def topic_record(topic: Topic) -> pb.Topic:
    return pb.Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=[partition_record(p) for p in topic.partitions],
        configs=config_records(topic.configs),
        internal=topic.internal,
    )


def topic_from(r: pb.Topic) -> Topic:
    partitions = tuple(partition_from(p) for p in r.partitions)
    return Topic(r.name, r.topic_id, partitions, configs_from(r.configs), r.internal)


def endpoint_records(endpoints: Iterable[Endpoint]) -> list[pb.Endpoint]:
    return [
        pb.Endpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
        for e in endpoints
    ]


def endpoints_from(records: Iterable[pb.Endpoint]) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(r.name, r.host, r.port, r.security_protocol) for r in records)


def broker_record(broker: Broker) -> pb.Broker:
    return pb.Broker(
        id=broker.id,
        host=broker.host,
        port=broker.port,
        rack=broker.rack,  # None leaves the optional field absent
        replication_endpoint=broker.replication_endpoint,
        incarnation_id=broker.incarnation_id,
        epoch=broker.epoch,
        fenced=broker.fenced,
        in_controlled_shutdown=broker.in_controlled_shutdown,
        endpoints=endpoint_records(broker.endpoints),
    )


def broker_from(r: pb.Broker) -> Broker:
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
        endpoints_from(r.endpoints),
    )


def acl_record(b: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=b.resource_type,
        resource_name=b.resource_name,
        pattern_type=b.pattern_type,
        principal=b.principal,
        host=b.host,
        operation=b.operation,
        permission_type=b.permission_type,
    )


def acl_from(r: pb.AclBinding) -> AclBinding:
    return AclBinding(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )


def acl_filter_record(f: AclBindingFilter) -> pb.AclBindingFilter:
    return pb.AclBindingFilter(  # None leaves an optional field absent
        resource_type=f.resource_type,
        resource_name=f.resource_name,
        pattern_type=f.pattern_type,
        principal=f.principal,
        host=f.host,
        operation=f.operation,
        permission_type=f.permission_type,
    )


def acl_filter_from(r: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType(r.resource_type),
        r.resource_name if r.HasField("resource_name") else None,
        PatternType(r.pattern_type),
        r.principal if r.HasField("principal") else None,
        r.host if r.HasField("host") else None,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )


def scram_record(user: str, mechanism: str, c: ScramCredential) -> pb.ScramCredential:
    return pb.ScramCredential(
        user=user,
        mechanism=mechanism,
        salt=c.salt,
        stored_key=c.stored_key,
        server_key=c.server_key,
        iterations=c.iterations,
    )


def scram_from(r: pb.ScramCredential) -> tuple[str, str, ScramCredential]:
    return r.user, r.mechanism, ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)


def feature_records(features: Iterable[tuple[str, int]]) -> list[pb.FeatureLevel]:
    return [pb.FeatureLevel(name=name, level=level) for name, level in features]


def features_from(records: Iterable[pb.FeatureLevel]) -> tuple[tuple[str, int], ...]:
    return tuple((r.name, r.level) for r in records)


def group_records(groups: Iterable[tuple[str, int]]) -> list[pb.GroupEntry]:
    return [pb.GroupEntry(group_id=g, coordinator_partition=p) for g, p in groups]


def groups_from(records: Iterable[pb.GroupEntry]) -> tuple[tuple[str, int], ...]:
    return tuple((r.group_id, r.coordinator_partition) for r in records)
