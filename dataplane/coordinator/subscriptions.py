"""What a KIP-848 group's target assignment is computed from: the subscribed topics' metadata
hash (KIP-1101: its change bumps the group epoch) and subscribed regular expressions, resolved
against the cluster's topic names."""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.protocol.errors import ErrorCode, KafkaError

# -- regular expressions ---------------------------------------------------------------------


@lru_cache(maxsize=1024)
def compile_regex(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except re.error:
        return None


def check_regex(regex: str) -> None:
    try:
        re.compile(regex)
    except re.error as e:
        raise KafkaError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.",
        ) from None


# -- metadata hash ---------------------------------------------------------------------------

_I64 = struct.Struct(">q")


@lru_cache(maxsize=65536)
def _topic_digest(topic: TopicMetadata) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(topic.topic_id)
    name = topic.name.encode()
    h.update(len(name).to_bytes(4, "big") + name)
    h.update(topic.num_partitions.to_bytes(4, "big", signed=True))
    if topic.partition_racks is not None:
        for p, racks in enumerate(topic.partition_racks):
            for rack in sorted(racks):
                data = rack.encode()
                h.update(p.to_bytes(4, "big") + len(data).to_bytes(4, "big") + data)
    return h.digest()


def metadata_hash(names: Iterable[str], topics: Mapping[str, TopicMetadata]) -> int:
    """A 64-bit hash of the subscribed topics' metadata (id, name, partitions, racks): the
    group epoch is bumped when it changes (KIP-1101). 0 when no subscribed topic exists. Only
    compared with itself, so it need not be Kafka's value."""
    h = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(names):
        topic = topics.get(name)
        if topic is not None:
            h.update(_topic_digest(topic))
            found = True
    return _I64.unpack(h.digest())[0] if found else 0


def names_version(names: Sequence[str]) -> int:
    h = hashlib.blake2b(digest_size=8)
    for name in names:
        data = name.encode()
        h.update(len(data).to_bytes(4, "big") + data)
    return _I64.unpack(h.digest())[0]
