"""The TxnOffsetCommit handler (v0-v5): Kafka's order of checks (transactional id, group,
topics, unknown partitions), the member fields of v3+, the leader epoch of v2+, and
COORDINATOR_LOAD_IN_PROGRESS answered as COORDINATOR_NOT_AVAILABLE to v0-v1."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dataplane.coordinator.offsets import CommitPartition
from dataplane.handlers import txn_offset_commit
from dataplane.protocol.errors import ErrorCode

E = ErrorCode


class Authorizer:
    enabled = True

    def __init__(self, *denied: str) -> None:
        self.denied_names = set(denied)

    def authorize(self, conn: object, op: object, kind: object, name: str) -> bool:
        return name not in self.denied_names

    def denied(self, conn: object, op: object, kind: object, names: Any, **_: object) -> set[str]:
        return {n for n in names if n in self.denied_names}


class Coordinator:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def txn_offset_commit(self, *args: Any, verify: Any) -> dict[tuple[str, int], ErrorCode]:
        *fields, partitions = args
        self.calls.append((*fields, partitions))
        return {(p.topic, p.partition): E.coordinator_load_in_progress for p in partitions}


def request(version: int) -> Any:
    schema = importlib.import_module(f"kio.schema.txn_offset_commit.v{version}.request")
    fields: dict[str, Any] = {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
    if version >= 2:
        fields["committed_leader_epoch"] = 3
    partition = schema.TxnOffsetCommitRequestPartition
    topics = (
        schema.TxnOffsetCommitRequestTopic(
            name="t", partitions=(partition(**fields), partition(**fields | {"partition_index": 9}))
        ),
        schema.TxnOffsetCommitRequestTopic(name="secret", partitions=(partition(**fields),)),
    )
    extra = (
        {"generation_id": 4, "member_id": "m", "group_instance_id": None} if version >= 3 else {}
    )
    return schema.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=7, producer_epoch=1, topics=topics, **extra
    )


def handle(version: int, authorizer: Authorizer, coordinator: Coordinator) -> dict:
    ctx: Any = SimpleNamespace(
        header=SimpleNamespace(api_version=version),
        conn=None,
        services=SimpleNamespace(
            authorizer=authorizer,
            cache=SimpleNamespace(topics={"t": SimpleNamespace(partitions=[0, 1])}),
            group_coordinator=coordinator,
            txn_verifier=None,
        ),
    )
    response: Any = anyio.run(txn_offset_commit.handle, ctx, request(version))
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


@pytest.mark.parametrize("version", range(6))
def test_checks_and_fields(version: int) -> None:
    coordinator = Coordinator()
    loading = E.coordinator_not_available if version < 2 else E.coordinator_load_in_progress
    assert handle(version, Authorizer("secret"), coordinator) == {
        ("t", 0): loading,
        ("t", 9): E.unknown_topic_or_partition,
        ("secret", 0): E.topic_authorization_failed,
    }
    member = ("m", None, 4) if version >= 3 else ("", None, -1)
    epoch = 3 if version >= 2 else -1
    assert coordinator.calls == [
        ("g", 7, 1, *member, [CommitPartition("t", 0, 5, epoch, "")]),
    ]


def test_authorization_of_the_transactional_id_then_the_group() -> None:
    coordinator = Coordinator()
    for denied, error in (
        ("tx", E.transactional_id_authorization_failed),
        ("g", E.group_authorization_failed),
    ):
        assert set(handle(5, Authorizer(denied), coordinator).values()) == {error}
    assert coordinator.calls == []
