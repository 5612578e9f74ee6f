"""How each command kind and its result are stored: one ``Kind`` per command kind in
``KINDS``, converting its body to and from its message in ``CommandRecord.body`` and its result
to and from ``Result.kind`` (``proto/metadata_records.proto``). ``meta.records`` encodes whole
commands and states with them, and says how records may change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from meta import quotas, resource_configs
from meta.commands import (
    AllocateProducerIds,
    AlterConfigs,
    AlterPartition,
    AlterPartitionOutcome,
    AlterReassignments,
    AlterScramCredentials,
    BalanceLeaders,
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
    OfflineOutcome,
    OfflineReplicas,
    Outcome,
    ProducerIdBlock,
    RegisterBroker,
    RegisterGroups,
    RemoveExpiredTokens,
    RenewDelegationToken,
    ScramOutcome,
    ShutdownOutcome,
    TokenOutcome,
    UnfenceBroker,
    UnregisterBroker,
    UnregisterGroups,
    UpdateFeatures,
)
from meta.entity_proto import (
    acl_delete_outcome_from_proto,
    acl_delete_outcome_to_proto,
    acl_filter_from_proto,
    acl_filter_to_proto,
    acl_from_proto,
    acl_to_proto,
    assignments_from_proto,
    assignments_to_proto,
    config_alteration_from_proto,
    config_alteration_to_proto,
    configs_from_proto,
    configs_to_proto,
    endpoint_from_proto,
    endpoint_to_proto,
    feature_update_from_proto,
    feature_update_to_proto,
    features_from_proto,
    features_to_proto,
    groups_from_proto,
    groups_to_proto,
    isr_outcome_from_proto,
    isr_outcome_to_proto,
    reassignment_from_proto,
    reassignment_to_proto,
    scram_from_proto,
    scram_to_proto,
    token_from_proto,
    token_to_proto,
    topic_from_proto,
    topic_to_proto,
)
from meta.model import Topic
from meta.partition_leadership import ElectionType, IsrChange
from meta.protocol import ErrorCode
from meta.topic_planning import NewTopic, Rejection
from proto import metadata_records_pb2 as pb

B = TypeVar("B")
R = TypeVar("R")


class RecordError(Exception):
    """A stored record this code cannot read."""


@dataclass(frozen=True)
class Kind(Generic[B, R]):
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
        assignments=assignments_to_proto(t.assignments),
        configs=configs_to_proto(t.configs),
        internal=t.internal,
        topic_id=t.topic_id,
        placement_seed=t.placement_seed,
    )


def _new_topic_from(r: pb.NewTopic) -> NewTopic:
    return NewTopic(
        r.name,
        r.num_partitions,
        r.replication_factor,
        assignments_from_proto(r.assignments),
        configs_from_proto(r.configs),
        r.internal,
        r.topic_id,
        r.placement_seed,
    )


def _topic_outcome(outcome: Topic | Rejection) -> pb.TopicOutcome:
    if isinstance(outcome, Topic):
        return pb.TopicOutcome(created=topic_to_proto(outcome))
    return pb.TopicOutcome(
        rejected=pb.Rejection(error_code=outcome.error_code, message=outcome.message)
    )


def _topic_outcome_from(r: pb.TopicOutcome) -> Topic | Rejection:
    if r.HasField("created"):
        return topic_from_proto(r.created)
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
        endpoints=[endpoint_to_proto(e) for e in b.endpoints],
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
        tuple(endpoint_from_proto(e) for e in r.endpoints),
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


def _alter_partition_outcome(o: AlterPartitionOutcome) -> pb.AlterPartitionResult:
    return pb.AlterPartitionResult(
        error_code=o.error_code,
        error_message=o.error_message,
        partitions=[isr_outcome_to_proto(p) for p in o.partitions],
    )


def _alter_partition_outcome_from(r: pb.AlterPartitionResult) -> AlterPartitionOutcome:
    partitions = [isr_outcome_from_proto(p) for p in r.partitions]
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
        features=features_to_proto(b.features or ()),
    )


def _init_cluster_from(r: pb.InitCluster) -> InitCluster:
    return InitCluster(
        r.cluster_id, features_from_proto(r.features) if r.bootstraps_features else None
    )


def _outcome(o: Outcome) -> pb.Outcome:
    return pb.Outcome(error_code=o.error_code, error_message=o.error_message)


def _outcome_from(r: pb.Outcome) -> Outcome:
    return Outcome(ErrorCode(r.error_code), r.error_message)


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
        reassignments=[reassignment_to_proto(r) for r in b.reassignments],
        unclean_election_default=b.unclean_election_default,
        keep_replication_factor=b.keep_replication_factor,
    )


def _alter_reassignments_from(r: pb.AlterReassignments) -> AlterReassignments:
    return AlterReassignments(
        tuple(reassignment_from_proto(a) for a in r.reassignments),
        r.unclean_election_default,
        r.keep_replication_factor,
    )


KINDS: tuple[Kind[Any, Any], ...] = (
    Kind(InitCluster, "init_cluster", _init_cluster, _init_cluster_from),
    Kind(
        CreateTopics,
        "create_topics",
        lambda b: pb.CreateTopics(topics=[_new_topic(t) for t in b.topics]),
        lambda r: CreateTopics(tuple(_new_topic_from(t) for t in r.topics)),
        lambda outcomes: pb.CreateTopicsResult(topics=[_topic_outcome(o) for o in outcomes]),
        lambda r: [_topic_outcome_from(o) for o in r.topics],
    ),
    Kind(
        DeleteTopics,
        "delete_topics",
        lambda b: pb.DeleteTopics(names=b.names, topic_ids=b.topic_ids),
        lambda r: DeleteTopics(tuple(r.names), tuple(r.topic_ids)),
        _delete_outcomes,
        _delete_outcomes_from,
    ),
    Kind(RegisterBroker, "register_broker", _register_broker, _register_broker_from),
    Kind(
        FenceBroker,
        "fence_broker",
        _broker_epoch,
        lambda r: FenceBroker(r.broker_id, r.epoch, r.unclean_election_default),
    ),
    Kind(
        UnfenceBroker,
        "unfence_broker",
        _broker_epoch,
        lambda r: UnfenceBroker(r.broker_id, r.epoch, r.unclean_election_default),
    ),
    Kind(
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
    Kind(
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
    Kind(
        ElectLeaders,
        "elect_leaders",
        _elect_leaders,
        _elect_leaders_from,
        _election_outcomes,
        _election_outcomes_from,
    ),
    Kind(
        BalanceLeaders, "balance_leaders", lambda b: pb.BalanceLeaders(), lambda r: BalanceLeaders()
    ),
    Kind(
        AllocateProducerIds,
        "allocate_producer_ids",
        lambda b: pb.AllocateProducerIds(broker_id=b.broker_id, broker_epoch=b.broker_epoch),
        lambda r: AllocateProducerIds(r.broker_id, r.broker_epoch),
        _producer_ids,
        _producer_ids_from,
    ),
    Kind(
        RegisterGroups,
        "register_groups",
        lambda b: pb.RegisterGroups(groups=groups_to_proto(b.groups)),
        lambda r: RegisterGroups(groups_from_proto(r.groups)),
    ),
    Kind(
        UnregisterGroups,
        "unregister_groups",
        lambda b: pb.UnregisterGroups(group_ids=b.group_ids),
        lambda r: UnregisterGroups(tuple(r.group_ids)),
    ),
    Kind(
        CreateAcls,
        "create_acls",
        lambda b: pb.CreateAcls(bindings=[acl_to_proto(a) for a in b.bindings]),
        lambda r: CreateAcls(tuple(acl_from_proto(a) for a in r.bindings)),
        lambda outcomes: pb.CreateAclsResult(
            bindings=[
                pb.Outcome(error_code=o.error_code, error_message=o.error_message) for o in outcomes
            ]
        ),
        lambda r: [Outcome(ErrorCode(o.error_code), o.error_message) for o in r.bindings],
    ),
    Kind(
        DeleteAcls,
        "delete_acls",
        lambda b: pb.DeleteAcls(filters=[acl_filter_to_proto(f) for f in b.filters]),
        lambda r: DeleteAcls(tuple(acl_filter_from_proto(f) for f in r.filters)),
        lambda outcomes: pb.DeleteAclsResult(
            filters=[acl_delete_outcome_to_proto(o) for o in outcomes]
        ),
        lambda r: [acl_delete_outcome_from_proto(o) for o in r.filters],
    ),
    Kind(
        AlterScramCredentials,
        "alter_scram_credentials",
        lambda b: pb.AlterScramCredentials(
            upserts=[scram_to_proto(*upsert) for upsert in b.upserts],
            deletions=[pb.ScramCredentialDeletion(user=u, mechanism=m) for u, m in b.deletions],
        ),
        lambda r: AlterScramCredentials(
            tuple((u.user, u.mechanism, scram_from_proto(u)) for u in r.upserts),
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
    Kind(
        CreateDelegationToken,
        "create_delegation_token",
        lambda b: pb.CreateDelegationToken(token=token_to_proto(b.token)),
        lambda r: CreateDelegationToken(token_from_proto(r.token)),
        _token_outcome,
        _token_outcome_from,
    ),
    Kind(
        RenewDelegationToken,
        "renew_delegation_token",
        _change_token,
        lambda r: RenewDelegationToken(r.hmac, r.principal, r.period_ms, r.now_ms),
        _token_outcome,
        _token_outcome_from,
    ),
    Kind(
        ExpireDelegationToken,
        "expire_delegation_token",
        _change_token,
        lambda r: ExpireDelegationToken(r.hmac, r.principal, r.period_ms, r.now_ms),
        _token_outcome,
        _token_outcome_from,
    ),
    Kind(
        RemoveExpiredTokens,
        "remove_expired_tokens",
        lambda b: pb.RemoveExpiredTokens(now_ms=b.now_ms),
        lambda r: RemoveExpiredTokens(r.now_ms),
    ),
    Kind(
        AlterConfigs,
        "alter_configs",
        lambda b: pb.AlterConfigs(
            alterations=[config_alteration_to_proto(a) for a in b.alterations],
            validate_only=b.validate_only,
        ),
        lambda r: AlterConfigs(
            tuple(config_alteration_from_proto(a) for a in r.alterations), r.validate_only
        ),
        lambda outcomes: pb.AlterConfigsResult(resources=[_outcome(o) for o in outcomes]),
        lambda r: [_outcome_from(o) for o in r.resources],
    ),
    Kind(
        CreatePartitions,
        "create_partitions",
        _create_partitions,
        _create_partitions_from,
        _outcome,
        _outcome_from,
    ),
    Kind(
        AlterReassignments,
        "alter_reassignments",
        _alter_reassignments,
        _alter_reassignments_from,
        lambda outcomes: pb.AlterReassignmentsResult(partitions=[_outcome(o) for o in outcomes]),
        lambda r: [_outcome_from(o) for o in r.partitions],
    ),
    Kind(
        UpdateFeatures,
        "update_features",
        lambda b: pb.UpdateFeatures(
            updates=[feature_update_to_proto(u) for u in b.updates],
            validate_only=b.validate_only,
        ),
        lambda r: UpdateFeatures(
            tuple(feature_update_from_proto(u) for u in r.updates), r.validate_only
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
    Kind(
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
    Kind(
        UnregisterBroker,
        "unregister_broker",
        lambda b: pb.UnregisterBroker(
            broker_id=b.broker_id, unclean_election_default=b.unclean_election_default
        ),
        lambda r: UnregisterBroker(r.broker_id, r.unclean_election_default),
        _outcome,
        _outcome_from,
    ),
    Kind(
        resource_configs.AlterResourceConfigs,
        "alter_resource_configs",
        resource_configs.command_record,
        resource_configs.command_from,
        resource_configs.result_record,
        resource_configs.result_from,
    ),
    Kind(
        quotas.AlterClientQuotas,
        "alter_client_quotas",
        quotas.command_record,
        quotas.command_from,
        quotas.result_record,
        quotas.result_from,
    ),
)
BY_TYPE = {kind.body_type: kind for kind in KINDS}
_BY_NAME = {kind.name: kind for kind in KINDS}


def kind_named(name: str | None, record: str) -> Kind[Any, Any]:
    if name is None or name not in _BY_NAME:
        raise RecordError(f"a {record} of no command kind this code knows (a newer one?)")
    return _BY_NAME[name]
