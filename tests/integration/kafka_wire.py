"""The tests' Kafka protocol client: the product's blocking client (`cluster.kafka_client`),
for tests that need exact versions and raw bytes, under the client id "wire". Real client
libraries are used everywhere else; this exists to pin every supported version and to send
malformed input."""

from __future__ import annotations

from cluster.kafka_client import KafkaConnection, builder, encode, request_bytes

__all__ = ["WireClient", "builder", "encode", "request_bytes"]


class WireClient(KafkaConnection):
    client_id = b"wire"
