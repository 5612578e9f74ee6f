"""Kafka's eight levels of quota precedence for a (user, client-id), and the sensors clients
share under each."""

from __future__ import annotations

import pytest

from dataplane.quota.resolve import by_key, limit, metric_tags
from meta.quotas import CLIENT_ID, IP, USER, QuotaEntity

U, C = "alice", "app"
LEVELS: list[tuple[QuotaEntity, tuple[str, str]]] = [
    (((CLIENT_ID, C), (USER, U)), (U, C)),  # 1 user and client-id
    (((CLIENT_ID, None), (USER, U)), (U, C)),  # 2 user and default client-id
    (((USER, U),), (U, "")),  # 3 user
    (((CLIENT_ID, C), (USER, None)), (U, C)),  # 4 default user and client-id
    (((CLIENT_ID, None), (USER, None)), (U, C)),  # 5 default user and default client-id
    (((USER, None),), (U, "")),  # 6 default user
    (((CLIENT_ID, C),), ("", C)),  # 7 client-id
    (((CLIENT_ID, None),), ("", C)),  # 8 default client-id
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_level_with_a_quota_wins(level: int) -> None:
    # every level from this one down has a quota, worth its level number
    quotas = {entity: float(i + 1) for i, (entity, _) in enumerate(LEVELS) if i >= level}
    tags = metric_tags(quotas, U, C)
    assert tags == LEVELS[level][1]
    assert limit(quotas, tags) == float(level + 1)


def test_no_quota_no_tags_no_limit() -> None:
    assert metric_tags({}, U, C) == ("", "")
    assert limit({}, ("", "")) is None


def test_other_users_and_client_ids_do_not_match() -> None:
    quotas: dict[QuotaEntity, float] = {((USER, "bob"),): 1.0, ((CLIENT_ID, "other"),): 2.0}
    assert limit(quotas, metric_tags(quotas, U, C)) is None


def test_a_user_quota_is_shared_by_all_the_users_clients() -> None:
    quotas: dict[QuotaEntity, float] = {((USER, U),): 1.0}
    assert metric_tags(quotas, U, "a") == metric_tags(quotas, U, "b") == (U, "")


def test_a_default_client_id_quota_gives_each_client_id_its_own_sensor() -> None:
    quotas: dict[QuotaEntity, float] = {((CLIENT_ID, None),): 1.0}
    assert metric_tags(quotas, U, "a") != metric_tags(quotas, U, "b")


def test_a_user_and_default_client_quota_is_used_for_tags_of_user_and_client() -> None:
    # tags (user, client-id): level 1 missing, level 2 (user, <default>) applies
    quotas: dict[QuotaEntity, float] = {
        ((CLIENT_ID, None), (USER, U)): 3.0,
        ((CLIENT_ID, None), (USER, None)): 9.0,
    }
    assert limit(quotas, (U, C)) == 3.0
    assert limit(quotas, ("bob", C)) == 9.0


def test_quotas_of_one_key_only() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {
        ((USER, U),): {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0},
        ((IP, None),): {"connection_creation_rate": 3.0},
    }
    assert by_key(quotas, "consumer_byte_rate") == {((USER, U),): 2.0}
