"""The tests' Kafka protocol client: the product's blocking client (`cluster.kafka_client`),
for tests that need exact versions and raw bytes, under the client id "wire". Real client
libraries are used everywhere else; this exists to pin every supported version and to send
malformed input."""

from __future__ import annotations

from typing import Any

from cluster.kafka_client import KafkaConnection, builder, encode, request_bytes

__all__ = ["WireClient", "builder", "encode", "request_bytes", "topic_metadata"]

METADATA = 3


class WireClient(KafkaConnection):
    client_id = b"wire"


def topic_metadata(w: WireClient, topic: str) -> Any:
    """One topic's Metadata v12 answer (with leader epochs and the topic id)."""
    b = builder(METADATA, 12)
    r = w.call(
        METADATA,
        12,
        topics=(b.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (t,) = r.topics
    return t
