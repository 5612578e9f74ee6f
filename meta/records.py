"""The meta service's stored format: ``meta.state`` commands and state as versioned records.

Each Raft log entry holds one ``CommandRecord`` and each state dump one ``StateRecord``
(``proto/metadata_records.proto``), as Kafka stores its metadata as versioned records, so the
classes of ``meta.state`` and ``meta.model`` can change without breaking stored data: what is
stored is what this module writes, not the classes.

Schema evolution, like Kafka's metadata records:

- a field is only added (with a new field number, never reusing one) and its default (0, "",
  false, empty) must mean what data written before it meant: records without it read so;
- a command kind is one message in ``CommandRecord.body`` and, under the same name and number,
  its result in ``Result`` (the state remembers results to answer retries), plus one ``_Kind``
  entry in ``_KINDS`` here that converts both;
- a change older records cannot be read under increments ``RECORD_VERSION``, and decoding keeps
  a branch for each older version it still reads. A record of a newer version than this code
  knows is refused (no downgrade past a version change).

The format before these records, pickles of ``meta.state.Command`` (log entries, unpickled by
pysyncobj) and of ``MetaState`` (dumps), is still read: ``meta.raft`` hands both over as
objects. So until that format is no longer read, those classes keep their module and names.
A data dir holds it until the first dump after the upgrade (pysyncobj compacts its log at least
every 5 minutes while commands come).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from google.protobuf.message import Message

from meta import quotas, resource_configs
from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from meta.controller import ElectionType, IsrChange, NewTopic, Rejection
from meta.model import Broker, ConfigAlteration, Endpoint, Partition, ScramCredential, Topic
from meta.protocol import ErrorCode
from meta.state import (
    AclDeleteOutcome,
    AllocateProducerIds,
    AlterConfigs,
    AlterPartition,
    AlterPartitionOutcome,
    AlterReassignments,
    AlterScramCredentials,
    BalanceLeaders,
    Body,
    Command,
    ControlledShutdown,
    CreateAcls,
    CreateDelegationToken,
    CreatePartitions,
    CreateTopics,
    DeleteAcls,
    DeleteOutcome,
    DeleteTopics,
    ElectionOutcome,
    ElectLeaders,
    ExpireDelegationToken,
    FeatureOutcome,
    FenceBroker,
    InitCluster,
    IsrOutcome,
    MetaState,
    OfflineOutcome,
    OfflineReplicas,
    Outcome,
    ProducerIdBlock,
    RegisterBroker,
    RegisterGroups,
    Remembered,
    RemoveExpiredTokens,
    RenewDelegationToken,
    ScramOutcome,
    ShutdownOutcome,
    TokenOutcome,
    UnfenceBroker,
    UnregisterGroups,
    UpdateFeatures,
)
from meta.wire import token_from_proto, token_to_proto
from proto import metadata_records_pb2 as pb

RECORD_VERSION = 1

B = TypeVar("B")
R = TypeVar("R")


class RecordError(Exception):
    """A stored record this code cannot read."""


# ---------------------------------------------------------------- cluster metadata


def _configs(configs: Mapping[str, str]) -> list[pb.Config]:
    return [pb.Config(name=name, value=value) for name, value in configs.items()]


def _configs_from(records: Iterable[pb.Config]) -> dict[str, str]:
    return {config.name: config.value for config in records}


def _partition(partition: Partition) -> pb.Partition:
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


def _partition_from(r: pb.Partition) -> Partition:
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


def _topic(topic: Topic) -> pb.Topic:
    return pb.Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=[_partition(p) for p in topic.partitions],
        configs=_configs(topic.configs),
        internal=topic.internal,
    )


def _topic_from(r: pb.Topic) -> Topic:
    partitions = tuple(_partition_from(p) for p in r.partitions)
    return Topic(r.name, r.topic_id, partitions, _configs_from(r.configs), r.internal)


def _endpoints(endpoints: Iterable[Endpoint]) -> list[pb.Endpoint]:
    return [
        pb.Endpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
        for e in endpoints
    ]


def _endpoints_from(records: Iterable[pb.Endpoint]) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(r.name, r.host, r.port, r.security_protocol) for r in records)


def _broker(broker: Broker) -> pb.Broker:
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
        endpoints=_endpoints(broker.endpoints),
    )


def _broker_from(r: pb.Broker) -> Broker:
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
        _endpoints_from(r.endpoints),
    )


def _acl(b: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=b.resource_type,
        resource_name=b.resource_name,
        pattern_type=b.pattern_type,
        principal=b.principal,
        host=b.host,
        operation=b.operation,
        permission_type=b.permission_type,
    )


def _acl_from(r: pb.AclBinding) -> AclBinding:
    return AclBinding(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )


def _acl_filter(f: AclBindingFilter) -> pb.AclBindingFilter:
    return pb.AclBindingFilter(  # None leaves an optional field absent
        resource_type=f.resource_type,
        resource_name=f.resource_name,
        pattern_type=f.pattern_type,
        principal=f.principal,
        host=f.host,
        operation=f.operation,
        permission_type=f.permission_type,
    )


def _acl_filter_from(r: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType(r.resource_type),
        r.resource_name if r.HasField("resource_name") else None,
        PatternType(r.pattern_type),
        r.principal if r.HasField("principal") else None,
        r.host if r.HasField("host") else None,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )


def _scram(user: str, mechanism: str, c: ScramCredential) -> pb.ScramCredential:
    return pb.ScramCredential(
        user=user,
        mechanism=mechanism,
        salt=c.salt,
        stored_key=c.stored_key,
        server_key=c.server_key,
        iterations=c.iterations,
    )


def _scram_from(r: pb.ScramCredential) -> tuple[str, str, ScramCredential]:
    return r.user, r.mechanism, ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)


def _features(features: Iterable[tuple[str, int]]) -> list[pb.FeatureLevel]:
    return [pb.FeatureLevel(name=name, level=level) for name, level in features]


def _features_from(records: Iterable[pb.FeatureLevel]) -> tuple[tuple[str, int], ...]:
    return tuple((r.name, r.level) for r in records)


def _groups(groups: Iterable[tuple[str, int]]) -> list[pb.GroupEntry]:
    return [pb.GroupEntry(group_id=g, coordinator_partition=p) for g, p in groups]


def _groups_from(records: Iterable[pb.GroupEntry]) -> tuple[tuple[str, int], ...]:
    return tuple((r.group_id, r.coordinator_partition) for r in records)


# ---------------------------------------------------------------- command kinds


@dataclass(frozen=True)
class _Kind(Generic[B, R]):
    """How one command kind is stored: its body in ``CommandRecord.body`` and its result in
    ``Result.kind``, both under ``name``. A scalar result (an int, a bool, a str) is stored as
    it is: its converters are ``None``."""

    body_type: type[B]
    name: str
    body: Callable[[B], Message]
    body_from: Callable[[Any], B]
    result: Callable[[R], Message] | None = None
    result_from: Callable[[Any], R] | None = None


def _new_topic(t: NewTopic) -> pb.NewTopic:
    return pb.NewTopic(
        name=t.name,
        num_partitions=t.num_partitions,
        replication_factor=t.replication_factor,
        assignments=[
            pb.ReplicaAssignment(partition_index=index, broker_ids=brokers)
            for index, brokers in t.assignments
        ],
        configs=_configs(t.configs),
        internal=t.internal,
        topic_id=t.topic_id,
        placement_seed=t.placement_seed,
    )


def _new_topic_from(r: pb.NewTopic) -> NewTopic:
    return NewTopic(
        r.name,
        r.num_partitions,
        r.replication_factor,
        tuple((a.partition_index, tuple(a.broker_ids)) for a in r.assignments),
        _configs_from(r.configs),
        r.internal,
        r.topic_id,
        r.placement_seed,
    )


def _topic_outcome(outcome: Topic | Rejection) -> pb.TopicOutcome:
    if isinstance(outcome, Topic):
        return pb.TopicOutcome(created=_topic(outcome))
    return pb.TopicOutcome(
        rejected=pb.Rejection(error_code=outcome.error_code, message=outcome.message)
    )


def _topic_outcome_from(r: pb.TopicOutcome) -> Topic | Rejection:
    if r.HasField("created"):
        return _topic_from(r.created)
    return Rejection(ErrorCode(r.rejected.error_code), r.rejected.message)


def _register_broker(b: RegisterBroker) -> pb.RegisterBroker:
    return pb.RegisterBroker(
        broker_id=b.broker_id,
        host=b.host,
        port=b.port,
        rack=b.rack,
        replication_endpoint=b.replication_endpoint,
        incarnation_id=b.incarnation_id,
        unclean_election_default=b.unclean_election_default,
        endpoints=_endpoints(b.endpoints),
    )


def _register_broker_from(r: pb.RegisterBroker) -> RegisterBroker:
    rack = r.rack if r.HasField("rack") else None
    return RegisterBroker(
        r.broker_id,
        r.host,
        r.port,
        rack,
        r.replication_endpoint,
        r.incarnation_id,
        r.unclean_election_default,
        _endpoints_from(r.endpoints),
    )


def _broker_epoch(b: FenceBroker | UnfenceBroker) -> pb.BrokerEpoch:
    return pb.BrokerEpoch(
        broker_id=b.broker_id, epoch=b.epoch, unclean_election_default=b.unclean_election_default
    )


def _isr_change(c: IsrChange) -> pb.IsrChange:
    return pb.IsrChange(
        topic_id=c.topic_id,
        partition_index=c.partition_index,
        leader_epoch=c.leader_epoch,
        partition_epoch=c.partition_epoch,
        new_isr=c.new_isr,
        new_isr_broker_epochs=c.new_isr_broker_epochs,
    )


def _isr_change_from(r: pb.IsrChange) -> IsrChange:
    return IsrChange(
        r.topic_id,
        r.partition_index,
        r.leader_epoch,
        r.partition_epoch,
        tuple(r.new_isr),
        tuple(r.new_isr_broker_epochs),
    )


def _isr_outcome(o: IsrOutcome) -> pb.IsrOutcome:
    partition = None if o.partition is None else _partition(o.partition)
    return pb.IsrOutcome(
        topic_id=o.topic_id,
        partition_index=o.partition_index,
        error_code=o.error_code,
        error_message=o.error_message,
        partition=partition,
    )


def _isr_outcome_from(r: pb.IsrOutcome) -> IsrOutcome:
    partition = _partition_from(r.partition) if r.HasField("partition") else None
    return IsrOutcome(
        r.topic_id, r.partition_index, ErrorCode(r.error_code), r.error_message, partition
    )


def _alter_partition_outcome(o: AlterPartitionOutcome) -> pb.AlterPartitionResult:
    return pb.AlterPartitionResult(
        error_code=o.error_code,
        error_message=o.error_message,
        partitions=[_isr_outcome(p) for p in o.partitions],
    )


def _alter_partition_outcome_from(r: pb.AlterPartitionResult) -> AlterPartitionOutcome:
    partitions = [_isr_outcome_from(p) for p in r.partitions]
    return AlterPartitionOutcome(ErrorCode(r.error_code), r.error_message, partitions)


def _elect_leaders(b: ElectLeaders) -> pb.ElectLeaders:
    return pb.ElectLeaders(
        election_type=b.election_type,
        all_partitions=b.topic_partitions is None,
        topic_partitions=[
            pb.TopicPartitions(topic=topic, partitions=indexes)
            for topic, indexes in b.topic_partitions or ()
        ],
    )


def _elect_leaders_from(r: pb.ElectLeaders) -> ElectLeaders:
    wanted = tuple((t.topic, tuple(t.partitions)) for t in r.topic_partitions)
    return ElectLeaders(ElectionType(r.election_type), None if r.all_partitions else wanted)


def _election_outcomes(outcomes: list[ElectionOutcome]) -> pb.ElectLeadersResult:
    return pb.ElectLeadersResult(
        partitions=[
            pb.ElectionOutcome(
                topic=o.topic,
                partition_index=o.partition_index,
                error_code=o.error_code,
                error_message=o.error_message,
            )
            for o in outcomes
        ]
    )


def _election_outcomes_from(r: pb.ElectLeadersResult) -> list[ElectionOutcome]:
    return [
        ElectionOutcome(o.topic, o.partition_index, ErrorCode(o.error_code), o.error_message)
        for o in r.partitions
    ]


def _delete_outcomes(outcomes: list[DeleteOutcome]) -> pb.DeleteTopicsResult:
    return pb.DeleteTopicsResult(
        topics=[
            pb.DeleteOutcome(
                name=o.name,
                topic_id=o.topic_id,
                error_code=o.error_code,
                error_message=o.error_message,
            )
            for o in outcomes
        ]
    )


def _delete_outcomes_from(r: pb.DeleteTopicsResult) -> list[DeleteOutcome]:
    return [
        DeleteOutcome(o.name, o.topic_id, ErrorCode(o.error_code), o.error_message)
        for o in r.topics
    ]


def _shutdown_outcome(o: ShutdownOutcome) -> pb.ShutdownOutcome:
    return pb.ShutdownOutcome(
        may_exit=o.may_exit,
        leaderships_left=o.leaderships_left,
        error_code=o.error_code,
        error_message=o.error_message,
    )


def _shutdown_outcome_from(r: pb.ShutdownOutcome) -> ShutdownOutcome:
    return ShutdownOutcome(r.may_exit, r.leaderships_left, ErrorCode(r.error_code), r.error_message)


def _producer_ids(b: ProducerIdBlock) -> pb.ProducerIdBlock:
    return pb.ProducerIdBlock(
        first=b.first, count=b.count, error_code=b.error_code, error_message=b.error_message
    )


def _producer_ids_from(r: pb.ProducerIdBlock) -> ProducerIdBlock:
    return ProducerIdBlock(r.first, r.count, ErrorCode(r.error_code), r.error_message)


def _token_outcome(o: TokenOutcome) -> pb.TokenOutcome:
    return pb.TokenOutcome(
        error_code=o.error_code, error_message=o.error_message, expiry_ms=o.expiry_ms
    )


def _token_outcome_from(r: pb.TokenOutcome) -> TokenOutcome:
    return TokenOutcome(ErrorCode(r.error_code), r.error_message, r.expiry_ms)


def _change_token(b: RenewDelegationToken | ExpireDelegationToken) -> pb.ChangeDelegationToken:
    period = b.renew_period_ms if isinstance(b, RenewDelegationToken) else b.expiry_period_ms
    return pb.ChangeDelegationToken(
        hmac=b.hmac, principal=b.principal, period_ms=period, now_ms=b.now_ms
    )


def _init_cluster(b: InitCluster) -> pb.InitCluster:
    return pb.InitCluster(
        cluster_id=b.cluster_id,
        bootstraps_features=b.features is not None,
        features=_features(b.features or ()),
    )


def _init_cluster_from(r: pb.InitCluster) -> InitCluster:
    return InitCluster(r.cluster_id, _features_from(r.features) if r.bootstraps_features else None)


def _outcome(o: Outcome) -> pb.Outcome:
    return pb.Outcome(error_code=o.error_code, error_message=o.error_message)


def _outcome_from(r: pb.Outcome) -> Outcome:
    return Outcome(ErrorCode(r.error_code), r.error_message)


def _config_alteration(a: ConfigAlteration) -> pb.ConfigAlteration:
    return pb.ConfigAlteration(
        resource_type=a.resource_type,
        name=a.name,
        set=_configs(a.set),
        delete=a.delete,
        replace=a.replace,
    )


def _config_alteration_from(r: pb.ConfigAlteration) -> ConfigAlteration:
    resource_type: Literal["topic", "broker"] = "topic" if r.resource_type == "topic" else "broker"
    if r.resource_type != resource_type:
        raise RecordError(f"a config alteration of unknown resource type {r.resource_type!r}")
    return ConfigAlteration(resource_type, r.name, _configs_from(r.set), tuple(r.delete), r.replace)


def _create_partitions(b: CreatePartitions) -> pb.CreatePartitions:
    return pb.CreatePartitions(
        topic=b.topic,
        count=b.count,
        manual=b.assignments is not None,
        assignments=[pb.ReplicaAssignment(broker_ids=a) for a in b.assignments or ()],
        validate_only=b.validate_only,
        placement_seed=b.placement_seed,
    )


def _create_partitions_from(r: pb.CreatePartitions) -> CreatePartitions:
    assignments = tuple(tuple(a.broker_ids) for a in r.assignments) if r.manual else None
    return CreatePartitions(r.topic, r.count, assignments, r.validate_only, r.placement_seed)


def _alter_reassignments(b: AlterReassignments) -> pb.AlterReassignments:
    return pb.AlterReassignments(
        reassignments=[
            pb.Reassignment(
                topic=topic, partition=index, cancel=target is None, replicas=target or ()
            )
            for topic, index, target in b.reassignments
        ],
        unclean_election_default=b.unclean_election_default,
    )


def _alter_reassignments_from(r: pb.AlterReassignments) -> AlterReassignments:
    return AlterReassignments(
        tuple(
            (a.topic, a.partition, None if a.cancel else tuple(a.replicas)) for a in r.reassignments
        ),
        r.unclean_election_default,
    )


def _acl_delete_outcomes(outcomes: list[AclDeleteOutcome]) -> pb.DeleteAclsResult:
    return pb.DeleteAclsResult(
        filters=[
            pb.AclDeleteOutcome(
                error_code=o.error_code,
                error_message=o.error_message,
                deleted=[_acl(b) for b in o.deleted],
            )
            for o in outcomes
        ]
    )


def _acl_delete_outcomes_from(r: pb.DeleteAclsResult) -> list[AclDeleteOutcome]:
    return [
        AclDeleteOutcome(
            ErrorCode(o.error_code), o.error_message, tuple(_acl_from(b) for b in o.deleted)
        )
        for o in r.filters
    ]


_KINDS: tuple[_Kind[Any, Any], ...] = (
    _Kind(InitCluster, "init_cluster", _init_cluster, _init_cluster_from),
    _Kind(
        CreateTopics,
        "create_topics",
        lambda b: pb.CreateTopics(topics=[_new_topic(t) for t in b.topics]),
        lambda r: CreateTopics(tuple(_new_topic_from(t) for t in r.topics)),
        lambda outcomes: pb.CreateTopicsResult(topics=[_topic_outcome(o) for o in outcomes]),
        lambda r: [_topic_outcome_from(o) for o in r.topics],
    ),
    _Kind(
        DeleteTopics,
        "delete_topics",
        lambda b: pb.DeleteTopics(names=b.names, topic_ids=b.topic_ids),
        lambda r: DeleteTopics(tuple(r.names), tuple(r.topic_ids)),
        _delete_outcomes,
        _delete_outcomes_from,
    ),
    _Kind(RegisterBroker, "register_broker", _register_broker, _register_broker_from),
    _Kind(
        FenceBroker,
        "fence_broker",
        _broker_epoch,
        lambda r: FenceBroker(r.broker_id, r.epoch, r.unclean_election_default),
    ),
    _Kind(
        UnfenceBroker,
        "unfence_broker",
        _broker_epoch,
        lambda r: UnfenceBroker(r.broker_id, r.epoch, r.unclean_election_default),
    ),
    _Kind(
        AlterPartition,
        "alter_partition",
        lambda b: pb.AlterPartition(
            broker_id=b.broker_id,
            broker_epoch=b.broker_epoch,
            partitions=[_isr_change(c) for c in b.partitions],
        ),
        lambda r: AlterPartition(
            r.broker_id, r.broker_epoch, tuple(_isr_change_from(c) for c in r.partitions)
        ),
        _alter_partition_outcome,
        _alter_partition_outcome_from,
    ),
    _Kind(
        ControlledShutdown,
        "controlled_shutdown",
        lambda b: pb.ControlledShutdown(
            broker_id=b.broker_id,
            broker_epoch=b.broker_epoch,
            unclean_election_default=b.unclean_election_default,
        ),
        lambda r: ControlledShutdown(r.broker_id, r.broker_epoch, r.unclean_election_default),
        _shutdown_outcome,
        _shutdown_outcome_from,
    ),
    _Kind(
        ElectLeaders,
        "elect_leaders",
        _elect_leaders,
        _elect_leaders_from,
        _election_outcomes,
        _election_outcomes_from,
    ),
    _Kind(
        BalanceLeaders, "balance_leaders", lambda b: pb.BalanceLeaders(), lambda r: BalanceLeaders()
    ),
    _Kind(
        AllocateProducerIds,
        "allocate_producer_ids",
        lambda b: pb.AllocateProducerIds(broker_id=b.broker_id, broker_epoch=b.broker_epoch),
        lambda r: AllocateProducerIds(r.broker_id, r.broker_epoch),
        _producer_ids,
        _producer_ids_from,
    ),
    _Kind(
        RegisterGroups,
        "register_groups",
        lambda b: pb.RegisterGroups(groups=_groups(b.groups)),
        lambda r: RegisterGroups(_groups_from(r.groups)),
    ),
    _Kind(
        UnregisterGroups,
        "unregister_groups",
        lambda b: pb.UnregisterGroups(group_ids=b.group_ids),
        lambda r: UnregisterGroups(tuple(r.group_ids)),
    ),
    _Kind(
        CreateAcls,
        "create_acls",
        lambda b: pb.CreateAcls(bindings=[_acl(a) for a in b.bindings]),
        lambda r: CreateAcls(tuple(_acl_from(a) for a in r.bindings)),
        lambda outcomes: pb.CreateAclsResult(
            bindings=[
                pb.Outcome(error_code=o.error_code, error_message=o.error_message) for o in outcomes
            ]
        ),
        lambda r: [Outcome(ErrorCode(o.error_code), o.error_message) for o in r.bindings],
    ),
    _Kind(
        DeleteAcls,
        "delete_acls",
        lambda b: pb.DeleteAcls(filters=[_acl_filter(f) for f in b.filters]),
        lambda r: DeleteAcls(tuple(_acl_filter_from(f) for f in r.filters)),
        _acl_delete_outcomes,
        _acl_delete_outcomes_from,
    ),
    _Kind(
        AlterScramCredentials,
        "alter_scram_credentials",
        lambda b: pb.AlterScramCredentials(
            upserts=[_scram(*upsert) for upsert in b.upserts],
            deletions=[pb.ScramCredentialDeletion(user=u, mechanism=m) for u, m in b.deletions],
        ),
        lambda r: AlterScramCredentials(
            tuple(_scram_from(u) for u in r.upserts),
            tuple((d.user, d.mechanism) for d in r.deletions),
        ),
        lambda outcomes: pb.AlterScramCredentialsResult(
            users=[
                pb.ScramOutcome(user=o.user, error_code=o.error_code, error_message=o.error_message)
                for o in outcomes
            ]
        ),
        lambda r: [ScramOutcome(o.user, ErrorCode(o.error_code), o.error_message) for o in r.users],
    ),
    _Kind(
        CreateDelegationToken,
        "create_delegation_token",
        lambda b: pb.CreateDelegationToken(token=token_to_proto(b.token, pb.DelegationToken)),
        lambda r: CreateDelegationToken(token_from_proto(r.token)),
        _token_outcome,
        _token_outcome_from,
    ),
    _Kind(
        RenewDelegationToken,
        "renew_delegation_token",
        _change_token,
        lambda r: RenewDelegationToken(r.hmac, r.principal, r.period_ms, r.now_ms),
        _token_outcome,
        _token_outcome_from,
    ),
    _Kind(
        ExpireDelegationToken,
        "expire_delegation_token",
        _change_token,
        lambda r: ExpireDelegationToken(r.hmac, r.principal, r.period_ms, r.now_ms),
        _token_outcome,
        _token_outcome_from,
    ),
    _Kind(
        RemoveExpiredTokens,
        "remove_expired_tokens",
        lambda b: pb.RemoveExpiredTokens(now_ms=b.now_ms),
        lambda r: RemoveExpiredTokens(r.now_ms),
    ),
    _Kind(
        AlterConfigs,
        "alter_configs",
        lambda b: pb.AlterConfigs(
            alterations=[_config_alteration(a) for a in b.alterations],
            validate_only=b.validate_only,
        ),
        lambda r: AlterConfigs(
            tuple(_config_alteration_from(a) for a in r.alterations), r.validate_only
        ),
        lambda outcomes: pb.AlterConfigsResult(resources=[_outcome(o) for o in outcomes]),
        lambda r: [_outcome_from(o) for o in r.resources],
    ),
    _Kind(
        CreatePartitions,
        "create_partitions",
        _create_partitions,
        _create_partitions_from,
        _outcome,
        _outcome_from,
    ),
    _Kind(
        AlterReassignments,
        "alter_reassignments",
        _alter_reassignments,
        _alter_reassignments_from,
        lambda outcomes: pb.AlterReassignmentsResult(partitions=[_outcome(o) for o in outcomes]),
        lambda r: [_outcome_from(o) for o in r.partitions],
    ),
    _Kind(
        UpdateFeatures,
        "update_features",
        lambda b: pb.UpdateFeatures(
            updates=[
                pb.FeatureUpdate(name=name, level=level, upgrade_type=upgrade_type)
                for name, level, upgrade_type in b.updates
            ],
            validate_only=b.validate_only,
        ),
        lambda r: UpdateFeatures(
            tuple((u.name, u.level, u.upgrade_type) for u in r.updates), r.validate_only
        ),
        lambda outcomes: pb.UpdateFeaturesResult(
            features=[
                pb.FeatureOutcome(
                    name=o.name, error_code=o.error_code, error_message=o.error_message
                )
                for o in outcomes
            ]
        ),
        lambda r: [
            FeatureOutcome(o.name, ErrorCode(o.error_code), o.error_message) for o in r.features
        ],
    ),
    _Kind(
        OfflineReplicas,
        "offline_replicas",
        lambda b: pb.OfflineReplicas(
            broker_id=b.broker_id,
            broker_epoch=b.broker_epoch,
            partitions=[pb.TopicPartition(topic=t, partition=p) for t, p in b.partitions],
            unclean_election_default=b.unclean_election_default,
        ),
        lambda r: OfflineReplicas(
            r.broker_id,
            r.broker_epoch,
            tuple((tp.topic, tp.partition) for tp in r.partitions),
            r.unclean_election_default,
        ),
        lambda o: pb.OfflineOutcome(
            partitions_changed=o.partitions_changed,
            error_code=o.error_code,
            error_message=o.error_message,
        ),
        lambda r: OfflineOutcome(r.partitions_changed, ErrorCode(r.error_code), r.error_message),
    ),
    _Kind(
        resource_configs.AlterResourceConfigs,
        "alter_resource_configs",
        resource_configs.command_record,
        resource_configs.command_from,
        resource_configs.result_record,
        resource_configs.result_from,
    ),
    _Kind(
        quotas.AlterClientQuotas,
        "alter_client_quotas",
        quotas.command_record,
        quotas.command_from,
        quotas.result_record,
        quotas.result_from,
    ),
)
_BY_TYPE = {kind.body_type: kind for kind in _KINDS}
_BY_NAME = {kind.name: kind for kind in _KINDS}


def _kind_named(name: str | None, record: str) -> _Kind[Any, Any]:
    if name is None or name not in _BY_NAME:
        raise RecordError(f"a {record} of no command kind this code knows (a newer one?)")
    return _BY_NAME[name]


def _check_version(version: int, record: str) -> None:
    if version > RECORD_VERSION:
        raise RecordError(
            f"a {record} of version {version}, written by a newer Rafka than this one "
            f"(which reads versions up to {RECORD_VERSION})"
        )


# ---------------------------------------------------------------- commands


def encode_command(command: Command) -> bytes:
    """The Raft log entry of ``command``."""
    kind = _BY_TYPE[type(command.body)]
    record = pb.CommandRecord(
        version=RECORD_VERSION, request_id=command.request_id, now_ms=command.now_ms
    )
    getattr(record, kind.name).CopyFrom(kind.body(command.body))
    return record.SerializeToString()


def decode_command(data: bytes) -> Command:
    record = pb.CommandRecord.FromString(data)
    _check_version(record.version, "command record")
    kind = _kind_named(record.WhichOneof("body"), "command record")
    body: Body = kind.body_from(getattr(record, kind.name))
    return Command(record.request_id, record.now_ms, body)


# ---------------------------------------------------------------- state


def _result(remembered: Remembered) -> pb.Result:
    kind = _BY_TYPE[remembered.kind]
    record = pb.Result()
    if kind.result is None:
        setattr(record, kind.name, remembered.result)
    else:
        getattr(record, kind.name).CopyFrom(kind.result(remembered.result))
    return record


def _remembered_from(r: pb.AppliedRequest) -> Remembered:
    kind = _kind_named(r.result.WhichOneof("kind"), "remembered result")
    value = getattr(r.result, kind.name)
    result = value if kind.result_from is None else kind.result_from(value)
    return Remembered(r.now_ms, kind.body_type, result)


def encode_state(state: MetaState) -> bytes:
    """The state dump of ``state``."""
    return pb.StateRecord(
        version=RECORD_VERSION,
        cluster_id=state.cluster_id,
        offset=state.offset,
        topics=[_topic(topic) for topic in state.topics.values()],
        brokers=[_broker(broker) for broker in state.brokers.values()],
        applied_requests=[
            pb.AppliedRequest(request_id=request_id, now_ms=r.now_ms, result=_result(r))
            for request_id, r in state.applied_requests.items()
        ],
        next_producer_id=state.next_producer_id,
        groups=_groups(state.groups.items()),
        acls=[_acl(binding) for binding in state.acls],
        scram_credentials=[_scram(u, m, c) for (u, m), c in state.scram_credentials.items()],
        delegation_tokens=[
            token_to_proto(token, pb.DelegationToken) for token in state.delegation_tokens.values()
        ],
        broker_configs=[
            pb.BrokerConfigs(broker_id=broker_id, configs=_configs(configs))
            for broker_id, configs in state.broker_configs.items()
        ],
        features=_features(state.features.items()),
        features_initialized=state.features_initialized,
        resource_configs=resource_configs.state_records(state.resource_configs),
        client_quotas=quotas.state_records(state.client_quotas),
    ).SerializeToString()


def decode_state(data: bytes) -> MetaState:
    record = pb.StateRecord.FromString(data)
    _check_version(record.version, "state record")
    return MetaState(
        cluster_id=record.cluster_id,
        offset=record.offset,
        topics={t.name: t for t in map(_topic_from, record.topics)},
        brokers={b.id: b for b in map(_broker_from, record.brokers)},
        applied_requests={r.request_id: _remembered_from(r) for r in record.applied_requests},
        next_producer_id=record.next_producer_id,
        groups=dict(_groups_from(record.groups)),
        acls=dict.fromkeys(map(_acl_from, record.acls)),
        scram_credentials={
            (user, mechanism): credential
            for user, mechanism, credential in map(_scram_from, record.scram_credentials)
        },
        delegation_tokens={t.token_id: t for t in map(token_from_proto, record.delegation_tokens)},
        broker_configs={b.broker_id: _configs_from(b.configs) for b in record.broker_configs},
        features=dict(_features_from(record.features)),
        features_initialized=record.features_initialized,
        resource_configs=resource_configs.state_from(list(record.resource_configs)),
        client_quotas=quotas.state_from(record.client_quotas),
    )


# ---------------------------------------------------------------- the pickled format


def from_pickled_state(state: MetaState) -> MetaState:
    """A ``MetaState`` unpickled from a dump of the pickled format, whose remembered results
    are (now_ms, result) pairs that do not say their command's kind."""
    pairs: dict[str, Any] = dict(state.applied_requests)
    state.applied_requests = {
        request_id: Remembered(now_ms, _pickled_result_kind(result), result)
        for request_id, (now_ms, result) in pairs.items()
    }
    return state


def _pickled_result_kind(result: Any) -> type:
    """The command kind behind a result remembered by the pickled format. Where kinds share
    the result's shape (a bool, an int, an empty list), any of them stores it alike."""
    if isinstance(result, list):
        element = type(result[0]) if result else Topic
        return {DeleteOutcome: DeleteTopics, ElectionOutcome: ElectLeaders}.get(
            element, CreateTopics
        )
    return {
        str: InitCluster,
        bool: FenceBroker,
        int: BalanceLeaders,
        AlterPartitionOutcome: AlterPartition,
        ShutdownOutcome: ControlledShutdown,
        ProducerIdBlock: AllocateProducerIds,
    }[type(result)]
