"""The gRPC API's own messages (``proto/meta.proto``): watch events, requests and responses;
the entities they carry convert in ``meta.entity_proto``."""

from __future__ import annotations

from meta import quotas
from meta.commands import (
    AlterPartitionOutcome,
    Change,
    DeleteOutcome,
    ElectionOutcome,
    ElectLeaders,
)
from meta.entity_proto import (
    acl_to_proto,
    assignments_from_proto,
    broker_to_proto,
    isr_outcome_to_proto,
    partition_to_proto,
    scram_to_proto,
    token_to_proto,
    topic_to_proto,
)
from meta.model import ReassignmentInfo, Topic
from meta.partition_leadership import ElectionType, IsrChange
from meta.state import MetaState
from meta.topic_planning import NewTopic, Rejection
from proto import meta_pb2


def broker_config_to_proto(state: MetaState, broker_id: int) -> meta_pb2.BrokerConfig:
    return meta_pb2.BrokerConfig(
        broker_id=broker_id, configs=state.broker_configs.get(broker_id, {})
    )


def resource_config_to_proto(
    state: MetaState, resource_type: int, name: str
) -> meta_pb2.ResourceConfig:
    return meta_pb2.ResourceConfig(
        resource_type=resource_type,
        name=name,
        configs=state.resource_configs.get((resource_type, name), {}),
    )


def ongoing_reassignment_to_proto(r: ReassignmentInfo) -> meta_pb2.OngoingReassignment:
    return meta_pb2.OngoingReassignment(
        topic=r.topic,
        partition=r.partition,
        replicas=r.replicas,
        adding_replicas=r.adding_replicas,
        removing_replicas=r.removing_replicas,
    )


def ongoing_reassignment_from_proto(r: meta_pb2.OngoingReassignment) -> ReassignmentInfo:
    return ReassignmentInfo(
        r.topic,
        r.partition,
        tuple(r.replicas),
        tuple(r.adding_replicas),
        tuple(r.removing_replicas),
    )


def snapshot_event(state: MetaState) -> meta_pb2.WatchEvent:
    """The whole state as one event (call with the state locked)."""
    snapshot = meta_pb2.Snapshot(
        cluster_id=state.cluster_id,
        topics=[topic_to_proto(t) for t in state.topics.values()],
        brokers=[broker_to_proto(b) for b in state.brokers.values()],
        acls=[acl_to_proto(b) for b in state.acls],
        scram_credentials=[
            scram_to_proto(user, mechanism, c)
            for (user, mechanism), c in state.scram_credentials.items()
        ],
        delegation_tokens=[token_to_proto(t) for t in state.delegation_tokens.values()],
        broker_configs=[broker_config_to_proto(state, b) for b in state.broker_configs],
        finalized_features=state.features,
        resource_configs=[resource_config_to_proto(state, *key) for key in state.resource_configs],
        client_quotas=[quotas.quota_to_proto(state, e) for e in state.client_quotas],
    )
    return meta_pb2.WatchEvent(offset=state.offset, snapshot=snapshot)


def change_event(state: MetaState, change: Change) -> meta_pb2.WatchEvent:
    """The event for ``change``, right after the command that made it was applied.

    A command touches each topic, broker, credential and token at most once, so the current
    value is the value as of the change's offset (and an absent one was removed).
    """
    event = meta_pb2.WatchEvent(offset=change.offset)
    match change.kind, change.key:
        case "topic", str(name):
            event.topic.CopyFrom(topic_to_proto(state.topics[name]))
        case "topic_deleted", str(name):
            event.topic_deleted.name = name
            event.topic_deleted.topic_id = change.topic_id
        case "broker", int(broker_id):
            event.broker.CopyFrom(broker_to_proto(state.brokers[broker_id]))
        case "broker_unregistered", int(broker_id):
            event.broker_unregistered.broker_id = broker_id
        case "acls", _:
            event.acls.added.extend(acl_to_proto(b) for b in change.acls_added)
            event.acls.removed.extend(acl_to_proto(b) for b in change.acls_removed)
        case "scram", (str(user), str(mechanism)):
            credential = state.scram_credentials.get((user, mechanism))
            if credential is None:
                event.scram_credential_deleted.user = user
                event.scram_credential_deleted.mechanism = mechanism
            else:
                event.scram_credential.CopyFrom(scram_to_proto(user, mechanism, credential))
        case "token", str(token_id):
            token = state.delegation_tokens.get(token_id)
            if token is None:
                event.delegation_token_removed.token_id = token_id
            else:
                event.delegation_token.CopyFrom(token_to_proto(token))
        case "broker_config", int(broker_id):
            event.broker_config.CopyFrom(broker_config_to_proto(state, broker_id))
        case "features", _:
            event.features.SetInParent()
            event.features.features.update(state.features)
        case "resource_config", (int(resource_type), str(name)):
            event.resource_config.CopyFrom(resource_config_to_proto(state, resource_type, name))
        case "client_quota", tuple(entity):
            event.client_quota.CopyFrom(quotas.quota_to_proto(state, entity))  # type: ignore[arg-type]
        case _:
            raise ValueError(f"no event for {change}")
    return event


def new_topic_from_proto(
    request: meta_pb2.CreatableTopic, topic_id: bytes, placement_seed: int
) -> NewTopic:
    return NewTopic(
        name=request.name,
        num_partitions=request.num_partitions,
        replication_factor=request.replication_factor,
        assignments=assignments_from_proto(request.assignments),
        configs=dict(request.configs),
        internal=request.internal,
        topic_id=topic_id,
        placement_seed=placement_seed,
    )


def create_result(name: str, outcome: Topic | Rejection) -> meta_pb2.CreateTopicResult:
    if isinstance(outcome, Rejection):
        return meta_pb2.CreateTopicResult(
            name=name, error_code=outcome.error_code, error_message=outcome.message
        )
    return meta_pb2.CreateTopicResult(
        name=name,
        topic_id=outcome.topic_id,
        num_partitions=len(outcome.partitions),
        replication_factor=len(outcome.partitions[0].replicas),
        partitions=[partition_to_proto(p) for p in outcome.partitions],
        configs=outcome.configs,
    )


def delete_result(outcome: DeleteOutcome) -> meta_pb2.DeleteTopicResult:
    return meta_pb2.DeleteTopicResult(
        name=outcome.name,
        topic_id=outcome.topic_id,
        error_code=outcome.error_code,
        error_message=outcome.error_message,
    )


def isr_change_from_proto(item: meta_pb2.AlterPartitionItem) -> IsrChange:
    return IsrChange(
        topic_id=item.topic_id,
        partition_index=item.partition_index,
        leader_epoch=item.leader_epoch,
        partition_epoch=item.partition_epoch,
        new_isr=tuple(item.new_isr),
        new_isr_broker_epochs=tuple(item.new_isr_broker_epochs),
    )


def alter_partition_response(outcome: AlterPartitionOutcome) -> meta_pb2.AlterPartitionResponse:
    return meta_pb2.AlterPartitionResponse(
        error_code=outcome.error_code,
        error_message=outcome.error_message,
        results=[isr_outcome_to_proto(p) for p in outcome.partitions],
    )


def elect_leaders_from_proto(request: meta_pb2.ElectLeadersRequest) -> ElectLeaders:
    topic_partitions = None
    if not request.all_partitions:
        topic_partitions = tuple(
            (topic.topic, tuple(topic.partitions)) for topic in request.topic_partitions
        )
    return ElectLeaders(ElectionType(request.election_type), topic_partitions)


def elect_leaders_response(
    request: ElectLeaders, outcomes: list[ElectionOutcome]
) -> meta_pb2.ElectLeadersResponse:
    """Results grouped per topic, as Kafka's response: in request order (or by name for all)."""
    by_topic: dict[str, list[meta_pb2.PartitionElectionResult]] = {}
    for name, _ in request.topic_partitions or ():
        by_topic.setdefault(name, [])
    for outcome in outcomes:
        by_topic.setdefault(outcome.topic, []).append(
            meta_pb2.PartitionElectionResult(
                partition_id=outcome.partition_index,
                error_code=outcome.error_code,
                error_message=outcome.error_message,
            )
        )
    return meta_pb2.ElectLeadersResponse(
        replica_election_results=[
            meta_pb2.ReplicaElectionResult(topic=topic, partition_results=results)
            for topic, results in by_topic.items()
        ]
    )
