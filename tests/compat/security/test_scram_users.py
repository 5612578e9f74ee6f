"""The SCRAM admin APIs (DescribeUserScramCredentials, AlterUserScramCredentials): invalid
credentials, users named twice, and callers without CLUSTER DESCRIBE or ALTER."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.kafka_client import builder
from tests.compat.pair import Pair
from tests.compat.security.support import (
    ALTER_SCRAM,
    DESCRIBE_SCRAM,
    KAFKA_REQUEST_TEXT,
    Principals,
)

SCRAM_SORT = ["results", "results.*.credential_infos"]


def describe_scram(pair: Pair, case: str, users_: list[str] | None) -> None:
    b = builder(DESCRIBE_SCRAM, 0)
    pair.call(
        case,
        DESCRIBE_SCRAM,
        0,
        sort=SCRAM_SORT,
        users=None if users_ is None else tuple(b.UserName(name=u) for u in users_),
    )


def test_describe_scram(users: Principals) -> None:
    describe_scram(users.admin, "DescribeUserScramCredentials: every user", None)
    describe_scram(
        users.admin, "DescribeUserScramCredentials: a user and an unknown one", ["writer", "nobody"]
    )
    describe_scram(
        users.admin, "DescribeUserScramCredentials: a user named twice", ["writer", "writer"]
    )
    describe_scram(users.admin, "DescribeUserScramCredentials: an empty list", [])
    describe_scram(
        users.reader, "DescribeUserScramCredentials as reader (no CLUSTER DESCRIBE)", None
    )
    describe_scram(
        users.reader,
        "DescribeUserScramCredentials as reader (no CLUSTER DESCRIBE): named users",
        ["writer", "nobody"],
    )


def upsertion(user: str, iterations: int = 4096, mechanism: int = 1, salt: bytes = b"salt") -> Any:
    b = builder(ALTER_SCRAM, 0)
    return b.ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=b"\x01" * 32,
    )


def deletion(user: str, mechanism: int = 1) -> Any:
    return builder(ALTER_SCRAM, 0).ScramCredentialDeletion(name=user, mechanism=mechanism)


@pytest.mark.parametrize(
    ("what", "upsertions", "deletions"),
    [
        ("iterations below 4096", [upsertion("scram-a", 100)], []),
        ("iterations above 16384", [upsertion("scram-a", 20000)], []),
        ("an unknown mechanism", [upsertion("scram-a", mechanism=0)], []),
        ("mechanism 9", [upsertion("scram-a", mechanism=9)], []),
        ("an empty user name", [upsertion("")], []),
        ("an empty salt", [upsertion("scram-a", salt=b"")], []),
        ("a user upserted twice", [upsertion("scram-a"), upsertion("scram-a", mechanism=2)], []),
        ("a user upserted and deleted", [upsertion("scram-a")], [deletion("scram-a")]),
        ("deleting an unknown user", [], [deletion("nobody")]),
        ("deleting a mechanism the user lacks", [], [deletion("writer", 0)]),
        ("a good upsertion, then its deletion", [upsertion("scram-b")], []),
        ("deleting it", [], [deletion("scram-b")]),
    ],
)
def test_alter_scram(users: Principals, what: str, upsertions: list, deletions: list) -> None:
    users.admin.call(
        f"AlterUserScramCredentials: {what}",
        ALTER_SCRAM,
        0,
        sort=["results"],
        deletions=tuple(deletions),
        upsertions=tuple(upsertions),
    )


def test_alter_scram_unprivileged(users: Principals) -> None:
    users.writer.call(
        "AlterUserScramCredentials as writer (no CLUSTER ALTER)",
        ALTER_SCRAM,
        0,
        masked=KAFKA_REQUEST_TEXT,
        deletions=(),
        upsertions=(upsertion("scram-c"),),
    )
