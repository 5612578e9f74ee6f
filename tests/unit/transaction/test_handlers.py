"""The transaction APIs' handlers at every version they serve: requests built with kio,
answers encoded with kio (field names and types right), over the in-memory coordinator."""

from __future__ import annotations

import datetime
import sys
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.static.constants import EntityType

from dataplane.connection import Connection
from dataplane.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
)
from dataplane.protocol.codec import RequestHeader, encode_with_kio, entity_class
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext

from .harness import coordinator

E = ErrorCode


class _Authorizer:
    enabled = False

    def authorize(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def denied(self, *args: Any, **kwargs: Any) -> frozenset[str]:
        return frozenset()


def _topic(partitions: int, internal: bool = False) -> Any:
    return SimpleNamespace(partitions=(None,) * partitions, internal=internal)


def _services(txn_coordinator: Any) -> Any:
    return SimpleNamespace(
        txn_coordinator=txn_coordinator,
        authorizer=_Authorizer(),
        cache=SimpleNamespace(
            topics={
                "out": _topic(2),
                "__consumer_offsets": _topic(50, internal=True),
            },
            offset=42,
            features_epoch=-1,  # no level set in the meta service yet: the broker setting
            finalized_features={},
        ),
        offsets_topic=SimpleNamespace(name="__consumer_offsets"),
        config=SimpleNamespace(transaction_version=2),
        producer_ids=None,
    )


def _request(api_key: int, version: int, name: str, **fields: Any) -> Any:
    cls = entity_class(api_key, version, EntityType.request)
    module = sys.modules[cls.__module__]
    return getattr(module, name)(**fields)


async def _call(module: Any, services: Any, version: int, req: Any) -> Any:
    ctx = RequestContext(
        services=services,
        header=RequestHeader(module.API_KEY, version, 1, "test", 0),
        conn=Connection(peer="127.0.0.1:1"),
        supported={module.API_KEY: module.VERSIONS},
    )
    response = await module.handle(ctx, req)
    encode_with_kio(response)  # every field of that version present and well typed
    return response


def _mod(module: Any, name: str, version: int) -> Any:
    return sys.modules[entity_class(module.API_KEY, version, EntityType.request).__module__]


@pytest.mark.parametrize("version", range(0, 6))
def test_transaction_at_each_version(version: int) -> None:
    async def main() -> None:
        c, _, _ = coordinator()
        services = _services(c)
        async with anyio.create_task_group() as tg:
            tg.start_soon(c.run)
            fields: dict[str, Any] = {
                "transactional_id": "t",
                "transaction_timeout": datetime.timedelta(seconds=60),
            }
            if version >= 3:
                fields |= {"producer_id": -1, "producer_epoch": -1}
            init = _request(22, version, "InitProducerIdRequest", **fields)
            r = await _call(init_producer_id, services, version, init)
            assert r.error_code == E.none
            pid, epoch = r.producer_id, r.producer_epoch
            apv = min(version, 5)
            m = _mod(add_partitions_to_txn, "", apv)
            topics = (m.AddPartitionsToTxnTopic(name="out", partitions=(0, 1)),)
            if apv < 4:
                req = m.AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id="t",
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=topics,
                )
                r = await _call(add_partitions_to_txn, services, apv, req)
                results = r.results_by_topic_v3_and_below
            else:
                txn = m.AddPartitionsToTxnTransaction(
                    transactional_id="t",
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=False,
                    topics=topics,
                )
                r = await _call(
                    add_partitions_to_txn,
                    services,
                    apv,
                    m.AddPartitionsToTxnRequest(transactions=(txn,)),
                )
                (result,) = r.results_by_transaction
                results = result.topic_results
            assert {p.partition_error_code for t in results for p in t.results_by_partition} == {
                E.none
            }
            aov = min(version, 4)
            r = await _call(
                add_offsets_to_txn,
                services,
                aov,
                _request(
                    25,
                    aov,
                    "AddOffsetsToTxnRequest",
                    transactional_id="t",
                    producer_id=pid,
                    producer_epoch=epoch,
                    group_id="g",
                ),
            )
            assert r.error_code == E.none
            r = await _call(
                end_txn,
                services,
                version,
                _request(
                    26,
                    version,
                    "EndTxnRequest",
                    transactional_id="t",
                    producer_id=pid,
                    producer_epoch=epoch,
                    committed=True,
                ),
            )
            assert r.error_code == E.none
            if version >= 5:
                assert (r.producer_id, r.producer_epoch) == (pid, epoch + 1)
            r = await _call(
                describe_transactions,
                services,
                0,
                _request(65, 0, "DescribeTransactionsRequest", transactional_ids=("t", "nope")),
            )
            assert [s.error_code for s in r.transaction_states] == [
                E.none,
                E.transactional_id_not_found,
            ]
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_add_partitions_checks_topics() -> None:
    async def main() -> None:
        c, _, _ = coordinator()
        services = _services(c)
        _, pid, epoch = await c.init_producer_id("t", 1000)
        m = _mod(add_partitions_to_txn, "", 3)
        req = m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="t",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(
                m.AddPartitionsToTxnTopic(name="out", partitions=(0, 7)),
                m.AddPartitionsToTxnTopic(name="__consumer_offsets", partitions=(0,)),
            ),
        )
        r = await _call(add_partitions_to_txn, services, 3, req)
        codes = {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        assert codes == {
            ("out", 0): E.operation_not_attempted,
            ("out", 7): E.unknown_topic_or_partition,
            ("__consumer_offsets", 0): E.topic_authorization_failed,
        }

    anyio.run(main)


@pytest.mark.parametrize("version", range(0, 3))
def test_list_transactions(version: int) -> None:
    async def main() -> None:
        c, _, _ = coordinator()
        services = _services(c)
        await c.init_producer_id("t", 1000)
        fields: dict[str, Any] = {"state_filters": ("Empty", "Bogus"), "producer_id_filters": ()}
        if version >= 1:
            fields["duration_filter"] = -1
        if version >= 2:
            fields["transactional_id_pattern"] = "["
        r = await _call(
            list_transactions,
            services,
            version,
            _request(66, version, "ListTransactionsRequest", **fields),
        )
        assert r.unknown_state_filters == ("Bogus",)
        if version >= 2:
            assert r.error_code == E.invalid_regular_expression
        else:
            assert r.error_code == E.none
            assert [s.transactional_id for s in r.transaction_states] == ["t"]

    anyio.run(main)


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_finalizes_transaction_version(version: int) -> None:
    async def main() -> None:
        services = _services(None)
        fields = (
            {"client_software_name": "x", "client_software_version": "1"} if version >= 3 else {}
        )
        r = await _call(
            api_versions, services, version, _request(18, version, "ApiVersionsRequest", **fields)
        )
        if version >= 3:
            (finalized,) = r.finalized_features
            assert (finalized.name, finalized.max_version_level) == ("transaction.version", 2)
            assert r.finalized_features_epoch == 42
            supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
            # below v4 Kafka leaves out the features supported from level 0 (KAFKA-17492)
            assert supported == (
                {"group.version": (0, 1), "streams.version": (0, 1), "transaction.version": (0, 2)}
                if version >= 4
                else {}
            )

    anyio.run(main)
