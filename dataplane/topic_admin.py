"""Creating and deleting topics through the meta service, shared by the admin APIs and
Metadata's auto-creation.

The broker resolves Kafka's "-1 = broker default" for partitions and replication factor, the
meta service validates and applies, and the call returns once this broker's metadata cache
shows the change, so the client's next request to this broker already sees it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode
from meta import entity_proto
from meta.client import MetaClient, MetaError
from proto import meta_pb2

log = logging.getLogger("rafka.topics")

_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PROPAGATION_S = 10.0  # how long to wait for our own cache to show a change we made


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's Topic.isInternal, by name: written by their coordinators only, never matched by a
subscribed regular expression."""


def valid_topic_name(name: str) -> bool:
    return bool(_LEGAL.fullmatch(name)) and name not in (".", "..")


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    # (partition index, broker ids) as requested: a partition named twice is the meta
    # service's to refuse
    assignments: list[tuple[int, list[int]]] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False  # __consumer_offsets and friends


class TopicAdmin:
    """Topic creation and deletion as this broker does them for its clients."""

    def __init__(
        self,
        meta: MetaClient,
        cache: MetadataCache,
        default_partitions: int,
        default_replication_factor: int,
    ) -> None:
        """The defaults are num.partitions and default.replication.factor, for Kafka's -1."""
        self._meta = meta
        self._cache = cache
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool
    ) -> list[meta_pb2.CreateTopicResult]:
        """One result per topic, in order (Kafka error codes in `error_code`)."""
        if not topics:
            return []
        requests = [
            meta_pb2.CreatableTopic(
                name=t.name,
                num_partitions=_default(
                    t.num_partitions, 0 if t.assignments else self._default_partitions
                ),
                replication_factor=_default(
                    t.replication_factor, 0 if t.assignments else self._default_replication_factor
                ),
                assignments=entity_proto.assignments_to_proto(t.assignments),
                configs=t.configs,
                internal=t.internal,
            )
            for t in topics
        ]
        try:
            results = await self._meta.create_topics(requests, validate_only)
        except MetaError as e:
            log.warning("creating topics failed: the meta service did not answer (%s)", e)
            return [
                _failed(t.name, ErrorCode.request_timed_out, f"meta service unavailable: {e}")
                for t in topics
            ]
        created = {r.name: bytes(r.topic_id) for r in results if r.error_code == 0}
        if created and not validate_only:
            cache = self._cache
            await cache.wait_until(
                lambda: all(
                    (t := cache.topics.get(name)) is not None and t.topic_id == tid
                    for name, tid in created.items()
                ),
                _PROPAGATION_S,
            )
        return results

    async def delete_topics(
        self, names: Sequence[str], topic_ids: Sequence[bytes]
    ) -> list[meta_pb2.DeleteTopicResult]:
        """One result per name, then per id (Kafka error codes in `error_code`)."""
        try:
            results = await self._meta.delete_topics(names, topic_ids)
        except MetaError as e:
            log.warning("deleting topics failed: the meta service did not answer (%s)", e)
            failed = [meta_pb2.DeleteTopicResult(name=n) for n in names] + [
                meta_pb2.DeleteTopicResult(topic_id=i) for i in topic_ids
            ]
            for r in failed:
                r.error_code, r.error_message = (
                    ErrorCode.request_timed_out,
                    f"meta service unavailable: {e}",
                )
            return failed
        gone = {bytes(r.topic_id) for r in results if r.error_code == 0}
        if gone:
            cache = self._cache
            await cache.wait_until(lambda: not gone & cache.topics_by_id.keys(), _PROPAGATION_S)
        return results


def _default(value: int, default: int) -> int:
    return default if value == -1 else value


def _failed(name: str, code: int, message: str) -> meta_pb2.CreateTopicResult:
    return meta_pb2.CreateTopicResult(name=name, error_code=code, error_message=message)
