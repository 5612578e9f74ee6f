"""The meta service's stored format: commands and state as versioned records.

Each Raft log entry holds one ``CommandRecord`` and each state dump one ``StateRecord``
(``proto/metadata_records.proto``), as Kafka stores its metadata as versioned records, so the
classes of ``meta.commands``, ``meta.state`` and ``meta.model`` can change without breaking
stored data: what is stored is what this module writes, not the classes. Here are the whole
records and their version; ``meta.command_records`` converts each command kind and its result,
``meta.entity_proto`` the entities both kinds of records hold (messages the gRPC API
carries too: ``proto/metadata_entities.proto``).

Schema evolution, like Kafka's metadata records:

- a field is only added (with a new field number, never reusing one) and its default (0, "",
  false, empty) must mean what data written before it meant: records without it read so;
- a command kind is one message in ``CommandRecord.body`` and, under the same name and number,
  its result in ``Result`` (the state remembers results to answer retries), plus one ``Kind``
  entry in ``meta.command_records.KINDS`` that converts both;
- a change older records cannot be read under increments ``RECORD_VERSION``, and decoding keeps
  a branch for each older version it still reads. A record of a newer version than this code
  knows is refused (no downgrade past a version change).

The format before these records, pickles of ``meta.state.Command`` (log entries, unpickled by
pysyncobj) and of ``MetaState`` (dumps), is still read: ``meta.raft`` hands both over as
objects. So until that format is no longer read, those classes keep their names, and
``meta.state`` (their module then) still answers for them (``meta.state.PICKLED_CLASS_NAMES``),
as ``meta.controller`` does for the topic and partition classes they hold
(``meta.controller.PICKLED_CLASSES``).
A data dir holds it until the first dump after the upgrade (pysyncobj compacts its log at least
every 5 minutes while commands come).
"""

from __future__ import annotations

from typing import Any

from meta import quotas, resource_configs
from meta.command_records import BY_TYPE, RecordError, kind_named
from meta.commands import (
    AllocateProducerIds,
    AlterPartition,
    AlterPartitionOutcome,
    BalanceLeaders,
    Body,
    Command,
    ControlledShutdown,
    CreateTopics,
    DeleteOutcome,
    DeleteTopics,
    ElectionOutcome,
    ElectLeaders,
    FenceBroker,
    InitCluster,
    ProducerIdBlock,
    ShutdownOutcome,
)
from meta.entity_proto import (
    acl_from_proto,
    acl_to_proto,
    configs_from_proto,
    configs_to_proto,
    features_from_proto,
    features_to_proto,
    groups_from_proto,
    groups_to_proto,
    registration_from_proto,
    registration_to_proto,
    scram_from_proto,
    scram_to_proto,
    token_from_proto,
    token_to_proto,
    topic_from_proto,
    topic_to_proto,
)
from meta.model import Topic
from meta.state import MetaState, Remembered
from proto import metadata_records_pb2 as pb

RECORD_VERSION = 1


def _check_version(version: int, record: str) -> None:
    if version > RECORD_VERSION:
        raise RecordError(
            f"a {record} of version {version}, written by a newer Rafka than this one "
            f"(which reads versions up to {RECORD_VERSION})"
        )


# ---------------------------------------------------------------- commands


def encode_command(command: Command) -> bytes:
    """The Raft log entry of ``command``."""
    kind = BY_TYPE[type(command.body)]
    record = pb.CommandRecord(
        version=RECORD_VERSION, request_id=command.request_id, now_ms=command.now_ms
    )
    getattr(record, kind.name).CopyFrom(kind.body(command.body))
    return record.SerializeToString()


def decode_command(data: bytes) -> Command:
    record = pb.CommandRecord.FromString(data)
    _check_version(record.version, "command record")
    kind = kind_named(record.WhichOneof("body"), "command record")
    body: Body = kind.body_from(getattr(record, kind.name))
    return Command(record.request_id, record.now_ms, body)


# ---------------------------------------------------------------- state


def _result(remembered: Remembered) -> pb.Result:
    kind = BY_TYPE[remembered.kind]
    record = pb.Result()
    if kind.result is None:
        setattr(record, kind.name, remembered.result)
    else:
        getattr(record, kind.name).CopyFrom(kind.result(remembered.result))
    return record


def _remembered_from(r: pb.AppliedRequest) -> Remembered:
    kind = kind_named(r.result.WhichOneof("kind"), "remembered result")
    value = getattr(r.result, kind.name)
    result = value if kind.result_from is None else kind.result_from(value)
    return Remembered(r.now_ms, kind.body_type, result)


def encode_state(state: MetaState) -> bytes:
    """The state dump of ``state``."""
    return pb.StateRecord(
        version=RECORD_VERSION,
        cluster_id=state.cluster_id,
        offset=state.offset,
        topics=[topic_to_proto(topic) for topic in state.topics.values()],
        brokers=[registration_to_proto(broker) for broker in state.brokers.values()],
        applied_requests=[
            pb.AppliedRequest(request_id=request_id, now_ms=r.now_ms, result=_result(r))
            for request_id, r in state.applied_requests.items()
        ],
        next_producer_id=state.next_producer_id,
        groups=groups_to_proto(state.groups.items()),
        acls=[acl_to_proto(binding) for binding in state.acls],
        scram_credentials=[
            scram_to_proto(u, m, c) for (u, m), c in state.scram_credentials.items()
        ],
        delegation_tokens=[token_to_proto(token) for token in state.delegation_tokens.values()],
        broker_configs=[
            pb.BrokerConfigs(broker_id=broker_id, configs=configs_to_proto(configs))
            for broker_id, configs in state.broker_configs.items()
        ],
        features=features_to_proto(state.features.items()),
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
        topics={t.name: t for t in map(topic_from_proto, record.topics)},
        brokers={b.id: b for b in map(registration_from_proto, record.brokers)},
        applied_requests={r.request_id: _remembered_from(r) for r in record.applied_requests},
        next_producer_id=record.next_producer_id,
        groups=dict(groups_from_proto(record.groups)),
        acls=dict.fromkeys(map(acl_from_proto, record.acls)),
        scram_credentials={
            (c.user, c.mechanism): scram_from_proto(c) for c in record.scram_credentials
        },
        delegation_tokens={t.token_id: t for t in map(token_from_proto, record.delegation_tokens)},
        broker_configs={b.broker_id: configs_from_proto(b.configs) for b in record.broker_configs},
        features=dict(features_from_proto(record.features)),
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
