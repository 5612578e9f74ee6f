"""Conversions between the metadata model and the protobuf messages of ``proto/meta.proto``."""

from __future__ import annotations

from meta.controller import ElectionType, IsrChange, NewTopic, Rejection
from meta.model import Broker, Partition, Topic
from meta.state import (
    AlterPartitionOutcome,
    Change,
    DeleteOutcome,
    ElectionOutcome,
    ElectLeaders,
    MetaState,
)
from proto import meta_pb2


def partition_to_proto(partition: Partition) -> meta_pb2.Partition:
    return meta_pb2.Partition(
        index=partition.index,
        replicas=partition.replicas,
        isr=partition.isr,
        leader=partition.leader,
        leader_epoch=partition.leader_epoch,
        partition_epoch=partition.partition_epoch,
    )


def topic_to_proto(topic: Topic) -> meta_pb2.Topic:
    return meta_pb2.Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=[partition_to_proto(p) for p in topic.partitions],
        configs=topic.configs,
        internal=topic.internal,
    )


def broker_to_proto(broker: Broker) -> meta_pb2.Broker:
    return meta_pb2.Broker(
        id=broker.id,
        host=broker.host,
        port=broker.port,
        rack=broker.rack or "",
        fenced=broker.fenced,
        epoch=broker.epoch,
        replication_endpoint=broker.replication_endpoint,
        in_controlled_shutdown=broker.in_controlled_shutdown,
    )


def snapshot_event(state: MetaState) -> meta_pb2.WatchEvent:
    """The whole state as one event (call with the state locked)."""
    snapshot = meta_pb2.Snapshot(
        cluster_id=state.cluster_id,
        topics=[topic_to_proto(t) for t in state.topics.values()],
        brokers=[broker_to_proto(b) for b in state.brokers.values()],
    )
    return meta_pb2.WatchEvent(offset=state.offset, snapshot=snapshot)


def change_event(state: MetaState, change: Change) -> meta_pb2.WatchEvent:
    """The event for ``change``, right after the command that made it was applied.

    A command touches each topic and broker at most once, so the current value is the value as
    of the change's offset.
    """
    event = meta_pb2.WatchEvent(offset=change.offset)
    if change.kind == "topic":
        event.topic.CopyFrom(topic_to_proto(state.topics[str(change.key)]))
    elif change.kind == "topic_deleted":
        event.topic_deleted.name = str(change.key)
        event.topic_deleted.topic_id = change.topic_id
    else:
        event.broker.CopyFrom(broker_to_proto(state.brokers[int(change.key)]))
    return event


def new_topic_from_proto(
    request: meta_pb2.CreatableTopic, topic_id: bytes, placement_seed: int
) -> NewTopic:
    return NewTopic(
        name=request.name,
        num_partitions=request.num_partitions,
        replication_factor=request.replication_factor,
        assignments=tuple((a.partition_index, tuple(a.broker_ids)) for a in request.assignments),
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
        results=[
            meta_pb2.AlterPartitionResult(
                topic_id=p.topic_id,
                partition_index=p.partition_index,
                error_code=p.error_code,
                error_message=p.error_message,
                partition=partition_to_proto(p.partition) if p.partition else None,
            )
            for p in outcome.partitions
        ],
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
