"""Commands and state survive their stored records (meta.records) unchanged."""

from __future__ import annotations

import uuid
from typing import get_args

import pytest

from meta.records import (
    RECORD_VERSION,
    RecordError,
    decode_command,
    decode_state,
    encode_command,
    encode_state,
)
from meta.state import Body, Command, InitCluster, MetaState, apply
from proto import metadata_records_pb2 as pb

from .legacy_steps import AFTER_DUMP, BEFORE_DUMP
from .machine import NOW


def run_steps() -> tuple[MetaState, list[Command]]:
    state, commands = MetaState(), []
    for step in BEFORE_DUMP + AFTER_DUMP:
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
