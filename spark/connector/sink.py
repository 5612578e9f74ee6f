"""The Kafka sink: `write.format("kafka")` and `writeStream.format("kafka")`.

As with the official connector, the data needs a `value` column (string or binary) and may have
`key` (string or binary), `topic` (string; the `topic` option overrides it), `partition` (int),
`headers` (array<struct<key: string, value: binary>>) and `timestamp`; other columns are
ignored. Each task produces its rows with a librdkafka producer and fails unless every record is
acknowledged. Like the official sink it is at-least-once: a task or micro-batch that is retried
writes its records again.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from . import options as opts
from .client import client_config
from .source import HEADERS_TYPE


class KafkaWriteException(RuntimeError):
    pass


def _expect(schema: StructType, name: str, desired: list[DataType], missing: str | None) -> bool:
    """KafkaWriter.expression: the column must have one of the desired types; `missing` is the
    error when it is absent (None: optional)."""
    field = next((f for f in schema.fields if f.name == name), None)
    if field is None:
        if missing is not None:
            raise opts.IllegalArgumentException(missing)
        return False
    if not any(field.dataType == d for d in desired):
        names = " or ".join(d.simpleString() for d in desired)
        raise opts.IllegalArgumentException(
            f"{name} attribute unsupported type {field.dataType.simpleString()}. {name} must be "
            f"a(n) {names}"
        )
    return True


def validate_write_schema(schema: StructType, topic: str | None) -> None:
    if topic is None:
        _expect(
            schema,
            "topic",
            [StringType()],
            "topic option required when no 'topic' attribute is present. Use the topic option "
            "for setting a topic.",
        )
    _expect(schema, "key", [StringType(), BinaryType()], None)
    _expect(schema, "value", [StringType(), BinaryType()], "Required attribute 'value' not found")
    _expect(schema, "headers", [HEADERS_TYPE], None)
    _expect(schema, "partition", [IntegerType()], None)
    _expect(schema, "timestamp", [DoubleType(), TimestampType()], None)


def _timestamps_ms(column: Any, data_type: DataType) -> list[int | None]:
    """The record timestamps (ms) of a `timestamp` column, as the official sink takes them: a
    timestamp, or a double of seconds cast to one, with the microseconds truncated."""
    import pyarrow as pa

    if data_type == DoubleType():
        micros = [
            None if s is None or not math.isfinite(s) else int(s * 1_000_000)
            for s in column.to_pylist()
        ]
    else:
        micros = column.cast(pa.int64()).to_pylist()
    out: list[int | None] = []
    for us in micros:
        ms = None if us is None else -(-us // 1000) if us < 0 else us // 1000  # Java's `/`
        if ms is not None and ms < 0:
            raise KafkaWriteException(
                f"Invalid timestamp: {ms}. Timestamp should always be non-negative or null."
            )
        out.append(ms)
    return out


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


class _KafkaWriterBase:
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        opts.validate_sink(options)
        topic = options.get("topic")
        self.topic = topic.strip() if topic is not None else None
        validate_write_schema(schema, self.topic)
        self.fields = set(schema.fieldNames())
        self.ts_type = next((f.dataType for f in schema.fields if f.name == "timestamp"), None)
        # The Java producer's defaults (murmur2 partitioning of keys, acks=all, idempotence
        # unless the options conflict with it), so records land where the official connector
        # would put them and a retried request after a leader change is not written twice.
        self.conf = client_config(opts.kafka_params(options), "producer")

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        from confluent_kafka import Producer

        producer = Producer(dict(self.conf))
        errors: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None and not errors:
                errors.append(err)

        n = 0
        try:
            for batch in iterator:
                cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
                values = cols["value"]
                keys = cols.get("key") if "key" in self.fields else None
                topics = cols.get("topic") if self.topic is None else None
                parts = cols.get("partition") if "partition" in self.fields else None
                headers = cols.get("headers") if "headers" in self.fields else None
                stamps = (
                    None
                    if self.ts_type is None
                    else _timestamps_ms(batch.column("timestamp"), self.ts_type)
                )
                for i, value in enumerate(values):
                    topic = self.topic if topics is None else topics[i]
                    if topic is None:
                        raise KafkaWriteException(
                            "[KAFKA_NULL_TOPIC_IN_DATA] The Kafka message data sent to the "
                            "producer contains a null topic. Use the `topic` option for "
                            "setting a default topic."
                        )
                    kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
                    if keys is not None and keys[i] is not None:
                        kwargs["key"] = keys[i]
                    if parts is not None and parts[i] is not None:
                        kwargs["partition"] = parts[i]
                    if headers is not None and headers[i]:
                        kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
                    if stamps is not None and stamps[i] is not None:
                        kwargs["timestamp"] = stamps[i]
                    while True:
                        try:
                            producer.produce(topic, **kwargs)
                            break
                        except BufferError:
                            producer.poll(0.05)
                    n += 1
                    if errors:
                        break
                producer.poll(0)
                if errors:
                    break
            remaining = producer.flush(120)
            if remaining:
                raise KafkaWriteException(f"{remaining} records were not acknowledged in time")
            if errors:
                raise KafkaWriteException(f"Failed to send records to Kafka: {errors[0]}")
        finally:
            producer.flush(0)
        return KafkaCommitMessage(n)


class KafkaBatchWriter(_KafkaWriterBase, DataSourceArrowWriter):
    def commit(self, messages: list[Any]) -> None:
        pass

    def abort(self, messages: list[Any]) -> None:
        pass


class KafkaStreamWriter(_KafkaWriterBase, DataSourceStreamArrowWriter):
    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass
