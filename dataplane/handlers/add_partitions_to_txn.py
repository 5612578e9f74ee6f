"""AddPartitionsToTxn (24): partitions join a producer's transaction, on its coordinator.

v0-v3 carry one transaction (a producer's request); v4+ batch several, with `verify_only`
(KIP-890 part 1: is each partition already in the transaction?) — Kafka's brokers send those
to each other and need CLUSTER_ACTION (ours use the gRPC transport, so only tools send v4+).
As in Kafka, a transaction whose partitions are not all writable gets each failing partition's
error (TOPIC_AUTHORIZATION_FAILED: WRITE denied, or an internal topic; UNKNOWN_TOPIC_OR_PARTITION)
and OPERATION_NOT_ATTEMPTED for the others; WRITE on the transactional id is needed
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.topic_admin import INTERNAL_TOPICS
from dataplane.transaction.refusals import for_client_version
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 24
VERSIONS = (0, 5)
PRODUCER_FENCED_SINCE = 2
BATCHED_SINCE = 4

log = logging.getLogger("rafka.add_partitions_to_txn")

TopicPartitions = Sequence[tuple[str, Sequence[int]]]


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)

    def topic_results(errors: dict[tuple[str, int], ErrorCode]) -> tuple:
        by_topic: dict[str, list] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append(
                b.AddPartitionsToTxnPartitionResult(
                    partition_index=index,
                    partition_error_code=for_client_version(code, version, PRODUCER_FENCED_SINCE),
                )
            )
        return tuple(
            b.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=tuple(results))
            for topic, results in by_topic.items()
        )

    if version < BATCHED_SINCE:
        errors = await _transaction(
            ctx,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            [(t.name, t.partitions) for t in req.v3_and_below_topics],
            verify_only=False,
        )
        return b.AddPartitionsToTxnResponse(
            throttle_time=0, results_by_topic_v3_and_below=topic_results(errors)
        )
    authorizer = ctx.services.authorizer
    if authorizer.enabled and not authorizer.authorize(
        ctx.conn, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return b.AddPartitionsToTxnResponse(
            throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )
    results = []
    for txn in req.transactions:
        errors = await _transaction(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            [(t.name, t.partitions) for t in txn.topics],
            verify_only=txn.verify_only,
        )
        results.append(
            b.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=topic_results(errors)
            )
        )
    return b.AddPartitionsToTxnResponse(
        throttle_time=0, error_code=ErrorCode.none, results_by_transaction=tuple(results)
    )


async def _transaction(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: TopicPartitions,
    *,
    verify_only: bool,
) -> dict[tuple[str, int], ErrorCode]:
    """The error of each partition of one transaction (Kafka's KafkaApis checks, then the
    coordinator)."""
    partitions = list(
        dict.fromkeys((topic, index) for topic, indexes in topics for index in indexes)
    )
    services = ctx.services
    authorizer = services.authorizer
    from_client = ctx.header.api_version < BATCHED_SINCE
    if from_client and not authorizer.authorize(
        ctx.conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    cache = services.cache
    names = {topic for topic, _ in partitions}
    denied: set[str] = set()
    if from_client:
        internal = names & INTERNAL_TOPICS  # by name, as Kafka's Topic.isInternal (even unmade)
        denied = internal | authorizer.denied(
            ctx.conn, AclOperation.WRITE, ResourceType.TOPIC, names - internal
        )
    # Kafka's order: the refused partitions, then the unknown ones, then the others
    failed = dict.fromkeys(
        (tp for tp in partitions if tp[0] in denied), ErrorCode.topic_authorization_failed
    )
    for topic, index in partitions:
        info = cache.topics.get(topic)
        if topic not in denied and (info is None or not 0 <= index < len(info.partitions)):
            failed[(topic, index)] = ErrorCode.unknown_topic_or_partition
    if failed:
        log.info(
            "AddPartitionsToTxn of %r from %s: %s; nothing added",
            transactional_id,
            ctx.conn.peer,
            ", ".join(f"{t}-{p} {code.name}" for (t, p), code in sorted(failed.items())),
        )
        return failed | {
            tp: ErrorCode.operation_not_attempted for tp in partitions if tp not in failed
        }
    return await services.txn_coordinator.add_partitions(
        transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only
    )
