"""Client quotas in the meta state: Kafka's controller validation (its messages) and
application, with validate_only and removals."""

from __future__ import annotations

import uuid

import pytest

from meta.commands import Command
from meta.dispatch import apply
from meta.protocol import ErrorCode
from meta.quotas import (
    CLIENT_ID,
    IP,
    USER,
    AlterClientQuotas,
    QuotaAlteration,
    QuotaOutcome,
    entity_of,
)
from meta.state import MetaState

ALICE = ((USER, "alice"),)


def run(state: MetaState, *alterations: QuotaAlteration, validate_only: bool = False) -> list:
    command = Command(uuid.uuid4().hex, 1, AlterClientQuotas(alterations, validate_only))
    applied = apply(state, command)
    return [applied.result, applied.changes]


def test_set_change_and_remove_quotas() -> None:
    state = MetaState()
    outcomes, changes = run(
        state, QuotaAlteration(ALICE, (("producer_byte_rate", 1e6), ("request_percentage", 50.5)))
    )
    assert outcomes == [QuotaOutcome()]
    assert [c.kind for c in changes] == ["client_quota"]
    assert state.client_quotas == {ALICE: {"producer_byte_rate": 1e6, "request_percentage": 50.5}}
    run(state, QuotaAlteration(ALICE, (("producer_byte_rate", None),)))
    assert state.client_quotas == {ALICE: {"request_percentage": 50.5}}
    _, changes = run(state, QuotaAlteration(ALICE, (("request_percentage", None),)))
    assert state.client_quotas == {}
    assert len(changes) == 1  # the entity is gone


def test_removing_what_is_not_there_changes_nothing() -> None:
    state = MetaState()
    outcomes, changes = run(state, QuotaAlteration(ALICE, (("producer_byte_rate", None),)))
    assert outcomes == [QuotaOutcome()]
    assert changes == []


def test_validate_only_changes_nothing() -> None:
    state = MetaState()
    outcomes, changes = run(
        state, QuotaAlteration(ALICE, (("producer_byte_rate", 1.0),)), validate_only=True
    )
    assert outcomes == [QuotaOutcome()]
    assert changes == []
    assert state.client_quotas == {}


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ((), (("producer_byte_rate", 1.0),), "Invalid empty client quota entity"),
        ((("group", "g"),), (), "Unhandled client quota entity type: group"),
        (((USER, ""),), (), "Empty user not supported"),
        (
            ((IP, "1.2.3.4"), (USER, "u")),
            (),
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId",
        ),
        (((IP, "not-an-ip"),), (), "not-an-ip is not a valid IP or resolvable host."),
        (ALICE, (("connection_creation_rate", 1.0),), "Invalid configuration key "
         "connection_creation_rate"),
        (((IP, None),), (("producer_byte_rate", 1.0),), "Invalid configuration key "
         "producer_byte_rate"),
        (ALICE, (("producer_byte_rate", 0.0),), "Quota producer_byte_rate must be greater than 0"),
        (ALICE, (("producer_byte_rate", 1.5),), "producer_byte_rate cannot be a fractional value."),
        (ALICE, (("consumer_byte_rate", 2.0**64),), "Proposed value for consumer_byte_rate is too "
         "large for a LONG."),
        (((IP, "::1"),), (("connection_creation_rate", 2.0**31),), "Proposed value for "
         "connection_creation_rate is too large for an INT."),
        (
            ALICE,
            (("producer_byte_rate", 1.0), ("producer_byte_rate", None)),
            "Duplicate quota key producer_byte_rate not updating quota for this entity "
            "ClientQuotaEntity(entries={user=alice})",
        ),
    ],
)  # fmt: skip
def test_kafkas_refusals(entity: tuple, ops: tuple, message: str) -> None:
    state = MetaState()
    [outcome], changes = run(state, QuotaAlteration(entity, ops))
    assert outcome == QuotaOutcome(ErrorCode.INVALID_REQUEST, message)
    assert changes == []
    assert state.client_quotas == {}


def test_one_refused_entity_does_not_stop_the_others() -> None:
    state = MetaState()
    bad = QuotaAlteration(ALICE, (("nope", 1.0),))
    good = QuotaAlteration(((CLIENT_ID, None),), (("consumer_byte_rate", 5.0),))
    outcomes, _ = run(state, bad, good)
    assert [o.error_code for o in outcomes] == [ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert state.client_quotas == {((CLIENT_ID, None),): {"consumer_byte_rate": 5.0}}


def test_an_entity_named_twice_is_refused_the_second_time() -> None:
    state = MetaState()
    first = QuotaAlteration(ALICE, (("producer_byte_rate", 1.0),))
    second = QuotaAlteration(ALICE, (("producer_byte_rate", 2.0),))
    outcomes, _ = run(state, first, second)
    assert outcomes[1] == QuotaOutcome(
        ErrorCode.INVALID_REQUEST,
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})",
    )
    assert state.client_quotas == {ALICE: {"producer_byte_rate": 1.0}}


def test_entities_are_sorted_and_keep_the_last_name_of_a_type() -> None:
    assert entity_of([(USER, "a"), (CLIENT_ID, None), (USER, "b")]) == (
        (CLIENT_ID, None),
        (USER, "b"),
    )
