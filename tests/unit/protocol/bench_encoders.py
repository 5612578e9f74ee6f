"""Print µs per call of the dedicated encoders against kio's entity_writer.

Run: python -m tests.unit.protocol.bench_encoders   (a figure to read, never a test)

kio timings exclude building the kio dataclasses (inputs are prebuilt on both sides).
"""

from __future__ import annotations

import io
import timeit
from collections.abc import Callable
from typing import Any

from kio.serial import entity_writer

from dataplane.protocol.encoders import (
    FetchPartition,
    FetchTopic,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    ProducePartition,
    ProduceTopic,
    encode_fetch_response,
    encode_metadata_response,
    encode_produce_response,
)
from tests.unit.protocol import kio_models


def per_call_us(function: Callable[[], object]) -> float:
    timer = timeit.Timer(function)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=5, number=number)) / number * 1e6


def kio_encoder(entity: Any) -> Callable[[], bytes]:
    write = entity_writer(type(entity))

    def encode() -> bytes:
        buffer = io.BytesIO()
        write(buffer, entity)
        return buffer.getvalue()

    return encode


def main() -> None:
    produce = [ProduceTopic("events", [ProducePartition(0, 0, 123456, -1, 0)])]
    fetch = [
        FetchTopic(
            "events",
            bytes(range(16)),
            [FetchPartition(n, 0, 10**6, 10**6, 0, None, -1, bytes(1 << 20)) for n in range(10)],
        )
    ]
    brokers = [MetadataBroker(n, f"broker-{n}.rafka.internal", 9092, f"rack-{n}") for n in range(3)]
    metadata = [
        MetadataTopic(
            0,
            f"topic-{t}",
            t.to_bytes(16, "big"),
            False,
            [MetadataPartition(0, p, p % 3, 7, [0, 1, 2], [0, 1, 2], []) for p in range(10)],
        )
        for t in range(100)
    ]

    cases = [
        (
            "produce v11, 1 topic x 1 partition",
            lambda: encode_produce_response(11, produce),
            kio_encoder(kio_models.produce_response(11, produce, 0, ())),
        ),
        (
            "fetch v16, 1 topic x 10 partitions x 1 MB (buffers)",
            lambda: encode_fetch_response(16, fetch),
            kio_encoder(kio_models.fetch_response(16, fetch, 0, 0, 0, ())),
        ),
        (
            "fetch v16, same, joined into one bytes",
            lambda: b"".join(encode_fetch_response(16, fetch)),
            None,
        ),
        (
            "metadata v12, 3 brokers, 100 topics x 10 partitions",
            lambda: encode_metadata_response(12, brokers, metadata, "cluster", 0),
            kio_encoder(kio_models.metadata_response(12, brokers, metadata, "cluster", 0, 0, 0, 0)),
        ),
    ]
    print(f"{'case':55} {'ours µs':>10} {'kio µs':>10} {'speed-up':>9}")
    for name, ours, kio in cases:
        ours_us = per_call_us(ours)
        if kio is None:
            print(f"{name:55} {ours_us:10.1f}")
            continue
        kio_us = per_call_us(kio)
        print(f"{name:55} {ours_us:10.1f} {kio_us:10.1f} {kio_us / ours_us:8.1f}x")


if __name__ == "__main__":
    main()
