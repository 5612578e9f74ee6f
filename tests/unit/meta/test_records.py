"""Commands and state survive their stored records (meta.records) unchanged."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from meta.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from meta.commands import (
    AlterConfigs,
    AlterReassignments,
    AlterScramCredentials,
    Body,
    Command,
    CreateAcls,
    CreateDelegationToken,
    CreatePartitions,
    DeleteAcls,
    ExpireDelegationToken,
    InitCluster,
    OfflineReplicas,
    RegisterBroker,
    RemoveExpiredTokens,
    RenewDelegationToken,
    UnregisterBroker,
    UpdateFeatures,
)
from meta.dispatch import apply
from meta.model import ConfigAlteration, DelegationToken, Endpoint, ScramCredential
from meta.quotas import CLIENT_ID, IP, USER, AlterClientQuotas, QuotaAlteration
from meta.records import (
    RECORD_VERSION,
    RecordError,
    decode_command,
    decode_state,
    encode_command,
    encode_state,
)
from meta.resource_configs import GROUP, AlterResourceConfigs, ResourceConfigAlteration
from meta.state import MetaState
from proto import metadata_records_pb2 as pb

from .legacy_steps import AFTER_DUMP, BEFORE_DUMP, Step
from .machine import NOW

_READ_ORDERS = AclBinding(
    ResourceType.TOPIC,
    "orders",
    PatternType.PREFIXED,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
_KEYS = ScramCredential(b"salt", b"stored", b"server", 4096)


def _token(token_id: str, expiry_ms: int) -> DelegationToken:
    return DelegationToken(
        token_id, token_id.encode(), "User:alice", "User:bob", ("User:carol",), NOW, expiry_ms,
        NOW + 10_000,
    )  # fmt: skip


# Kinds added after the pickled format (so not in legacy_steps), each with a result that is
# stored non-trivially: an error, deleted bindings, a token.
SECURITY_STEPS: list[Step] = [
    lambda s: RegisterBroker(
        4,
        "h4",
        9092,
        None,
        "h4:9392",
        b"incarnation-4",
        False,
        (
            Endpoint("INTERNAL", "h4", 9092, "PLAINTEXT"),
            Endpoint("SASL_SSL", "h4", 9093, "SASL_SSL"),
        ),
    ),
    lambda s: CreateAcls((_READ_ORDERS, replace(_READ_ORDERS, principal="nocolon"))),
    lambda s: DeleteAcls(
        (
            AclBindingFilter(
                ResourceType.ANY,
                None,
                PatternType.MATCH,
                "User:alice",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            ),
            AclBindingFilter(
                ResourceType.UNKNOWN,
                "x",
                PatternType.ANY,
                None,
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            ),
        )
    ),
    lambda s: CreateAcls((_READ_ORDERS,)),  # kept in the state
    lambda s: AlterScramCredentials(
        (("alice", "SCRAM-SHA-256", _KEYS), ("bob", "SCRAM-SHA-1", _KEYS)),
        (("carol", "SCRAM-SHA-512"),),
    ),
    lambda s: CreateDelegationToken(_token("t1", NOW + 1000)),
    lambda s: CreateDelegationToken(_token("t2", NOW + 1000)),
    lambda s: RenewDelegationToken(b"t1", "User:carol", 5000, NOW),
    lambda s: ExpireDelegationToken(b"t1", "User:mallory", -1, NOW),  # refused: not a renewer
    lambda s: RemoveExpiredTokens(NOW + 2000),  # t2 goes, t1 (renewed) stays
]


# Cluster administration kinds (after SECURITY_STEPS: broker 4 is registered), leaving dynamic
# configs, a reassignment in progress and finalized features in the state.
ADMIN_STEPS: list[Step] = [
    lambda s: InitCluster("ignored", (("transaction.version", 2), ("group.version", 0))),
    lambda s: AlterConfigs(
        (
            ConfigAlteration("topic", "orders", {"retention.ms": "5"}, ("cleanup.policy",)),
            ConfigAlteration("broker", "", {"log.retention.ms": "1", "a": "b"}, replace=True),
            ConfigAlteration("broker", "2", {"message.max.bytes": "10"}),
            ConfigAlteration("broker", "9"),  # refused: not registered
            ConfigAlteration("topic", "nope"),  # refused: no such topic
        )
    ),
    lambda s: AlterConfigs((ConfigAlteration("broker", "2", delete=("x",)),), validate_only=True),
    lambda s: CreatePartitions("orders", 3, None, placement_seed=11),
    lambda s: CreatePartitions("orders", 4, ((3, 4, 1),), validate_only=True),
    lambda s: CreatePartitions("orders", 1, None),  # refused: not an increase
    lambda s: AlterReassignments(
        (("orders", 0, (4, 1, 3)), ("orders", 1, None), ("nope", 0, (1,))), True
    ),
    lambda s: UpdateFeatures((("transaction.version", 1, 2), ("group.version", 1, 1))),
    lambda s: UpdateFeatures((("group.version", 5, 1),)),  # refused: unsupported level
    lambda s: OfflineReplicas(1, s.brokers[1].epoch, (("orders", 2),), False),
    lambda s: OfflineReplicas(1, s.brokers[1].epoch - 1, (("orders", 2),), False),  # stale
    lambda s: AlterResourceConfigs(
        (
            ResourceConfigAlteration(GROUP, "g1", {"share.record.lock.duration.ms": "20000"}),
            ResourceConfigAlteration(GROUP, "g2", {"share.isolation.level": "read_committed"}),
            ResourceConfigAlteration(GROUP, "g2", replace=True),  # a deleted group's configs
            ResourceConfigAlteration(GROUP, ""),  # refused: no name
            ResourceConfigAlteration(99, "x"),  # refused: no such type
        )
    ),
    lambda s: AlterClientQuotas(
        (
            QuotaAlteration(((CLIENT_ID, None), (USER, "alice")), (("producer_byte_rate", 2e6),)),
            QuotaAlteration(((IP, None),), (("connection_creation_rate", 10.0),)),
            QuotaAlteration(((IP, "no-ip"),), (("connection_creation_rate", 1.0),)),  # refused
        )
    ),
    lambda s: UnregisterBroker(9, True),  # refused: not registered
]


def run_steps() -> tuple[MetaState, list[Command]]:
    state, commands = MetaState(), []
    for step in BEFORE_DUMP + AFTER_DUMP + SECURITY_STEPS + ADMIN_STEPS:
        command = Command(uuid.uuid4().hex, NOW, step(state))
        apply(state, command)
        commands.append(command)
    return state, commands


def test_every_command_kind_and_its_result_round_trip() -> None:
    state, commands = run_steps()
    # A command kind added later needs a step here too (not in legacy_steps: its fixture is
    # of the pickled format, which never had that kind).
    assert {type(c.body) for c in commands} == set(get_args(Body))
    for command in commands:
        assert decode_command(encode_command(command)) == command
    assert decode_state(encode_state(state)) == state  # remembered results included
    assert state.acls
    assert state.scram_credentials
    assert list(state.delegation_tokens) == ["t1"]
    assert state.broker_configs == {
        -1: {"log.retention.ms": "1", "a": "b"},
        2: {"message.max.bytes": "10"},
    }
    assert state.features == {"transaction.version": 1, "group.version": 1}
    assert state.features_initialized
    assert state.resource_configs == {(GROUP, "g1"): {"share.record.lock.duration.ms": "20000"}}
    assert state.client_quotas == {
        ((CLIENT_ID, None), (USER, "alice")): {"producer_byte_rate": 2e6},
        ((IP, None),): {"connection_creation_rate": 10.0},
    }
    assert state.topics["orders"].partitions[0].adding_replicas == (4,)
    assert len(state.topics["orders"].partitions) == 3


def test_the_state_keeps_the_order_of_topics_brokers_and_configs() -> None:
    state, _ = run_steps()
    restored = decode_state(encode_state(state))
    assert list(restored.topics) == list(state.topics)
    assert list(restored.brokers) == list(state.brokers)
    configs = state.topics["orders"].configs
    assert list(restored.topics["orders"].configs.items()) == list(configs.items())


def test_a_record_of_a_newer_version_is_refused() -> None:
    command = pb.CommandRecord.FromString(encode_command(Command("r", NOW, InitCluster("c"))))
    command.version = RECORD_VERSION + 1
    with pytest.raises(RecordError, match="newer Rafka"):
        decode_command(command.SerializeToString())
    state = pb.StateRecord(version=RECORD_VERSION + 1)
    with pytest.raises(RecordError, match="newer Rafka"):
        decode_state(state.SerializeToString())


def test_a_command_of_an_unknown_kind_is_refused() -> None:
    record = pb.CommandRecord(version=RECORD_VERSION, request_id="r", now_ms=NOW)
    with pytest.raises(RecordError, match="no command kind"):
        decode_command(record.SerializeToString())


FIXTURES = Path(__file__).parent / "fixtures" / "records-v1"


def _stored_commands() -> list[bytes]:
    """The Raft log entries of ``commands.bin``: each a 4-byte length, then the record."""
    data, commands = (FIXTURES / "commands.bin").read_bytes(), []
    while data:
        size = int.from_bytes(data[:4], "big")
        commands.append(data[4 : 4 + size])
        data = data[4 + size :]
    return commands


def test_records_written_before_the_shared_entity_messages_read_and_write_back_the_same() -> None:
    """``fixtures/records-v1``: the commands of `run_steps` (every kind there was) and the state
    dump after them, written before proto/metadata_entities.proto existed (the entities were
    then declared in metadata_records.proto). They decode, and encode to the same bytes: the
    shared messages kept every field number and type."""
    commands = _stored_commands()
    for data in commands:
        assert encode_command(decode_command(data)) == data
    dump = (FIXTURES / "state.bin").read_bytes()
    state = decode_state(dump)
    assert encode_state(state) == dump
    assert state.topics["orders"].configs == {"retention.ms": "5"}
    assert [b.rack for b in state.brokers.values()][:2] == [None, "rack-b"]
    assert state.client_quotas[((CLIENT_ID, None), (USER, "alice"))] == {"producer_byte_rate": 2e6}


def test_a_stored_acl_code_kafka_does_not_define_reads_as_unknown() -> None:
    """Records decode ACL codes as the gRPC API does (Kafka's fromCode): UNKNOWN, not a crash."""
    record = pb.CommandRecord.FromString(
        encode_command(Command("r", NOW, CreateAcls((_READ_ORDERS,))))
    )
    record.create_acls.bindings[0].operation = 99
    body = decode_command(record.SerializeToString()).body
    assert isinstance(body, CreateAcls)
    [binding] = body.bindings
    assert binding.operation == AclOperation.UNKNOWN
