"""DescribeClientQuotas filters: Kafka's match types, strictness and refusals."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dataplane.handlers.describe_client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    matching,
    parse_filter,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.quotas import CLIENT_ID, IP, USER

QUOTAS = {
    ((USER, "alice"),): {"producer_byte_rate": 1.0},
    ((USER, None),): {"producer_byte_rate": 2.0},
    ((CLIENT_ID, "app"), (USER, "alice")): {"consumer_byte_rate": 3.0},
    ((CLIENT_ID, None),): {"consumer_byte_rate": 4.0},
    ((IP, "10.0.0.1"),): {"connection_creation_rate": 5.0},
}


def component(kind: str, match_type: int, match: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(entity_type=kind, match_type=match_type, match=match)


def select(components: list[SimpleNamespace], strict: bool) -> list:
    exact, specified = parse_filter(components)
    return [entity for entity, _ in matching(QUOTAS, exact, specified, strict)]


def test_exact_user_not_strict_includes_its_combinations() -> None:
    assert select([component(USER, MATCH_EXACT, "alice")], strict=False) == [
        ((USER, "alice"),),
        ((CLIENT_ID, "app"), (USER, "alice")),
    ]


def test_exact_user_strict_is_the_user_alone() -> None:
    assert select([component(USER, MATCH_EXACT, "alice")], strict=True) == [((USER, "alice"),)]


def test_default_and_any_match_types() -> None:
    assert select([component(USER, MATCH_DEFAULT)], strict=True) == [((USER, None),)]
    assert select([component(CLIENT_ID, MATCH_SPECIFIED)], strict=False) == [
        ((CLIENT_ID, "app"), (USER, "alice")),
        ((CLIENT_ID, None),),
    ]


def test_no_components_not_strict_is_everything_strict_is_nothing() -> None:
    assert len(select([], strict=False)) == len(QUOTAS)
    assert select([], strict=True) == []


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([component("", MATCH_EXACT, "x")], ErrorCode.invalid_request,
         "Invalid empty entity type."),
        (
            [component(USER, MATCH_DEFAULT), component(USER, MATCH_SPECIFIED)],
            ErrorCode.invalid_request,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([component("topic", MATCH_EXACT, "t")], ErrorCode.unsupported_version,
         "Unsupported entity type topic"),
        ([component(USER, MATCH_EXACT)], ErrorCode.invalid_request,
         "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([component(USER, MATCH_DEFAULT, "x")], ErrorCode.invalid_request,
         "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([component(USER, MATCH_SPECIFIED, "x")], ErrorCode.invalid_request,
         "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
        ([component(USER, 7)], ErrorCode.invalid_request, "Unknown match type 7"),
        (
            [component(IP, MATCH_SPECIFIED), component(USER, MATCH_SPECIFIED)],
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        ),
    ],
)  # fmt: skip
def test_kafkas_refusals(components: list, code: ErrorCode, message: str) -> None:
    with pytest.raises(KafkaError) as refused:
        parse_filter(components)
    assert (refused.value.code, refused.value.message) == (code, message)
