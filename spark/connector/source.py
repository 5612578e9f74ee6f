"""Rafka's Spark source and sink for Kafka, on PySpark's Python Data Source API.

It has the contract of Spark's official connector (spark-sql-kafka-0-10): the same options, the
same schema, the same offsets JSON in the streaming checkpoint. See spark/README section in the
repository README ("Spark pipeline") for how `format("kafka")` reaches it.

Where things run:
- `KafkaDataSource.schema()` runs on the driver (a Python worker) when a DataFrame is defined.
- A batch reader's `partitions()` runs on the driver at planning: it resolves the start and end
  offsets of every partition and splits them into offset ranges; `read()` runs in the tasks, each
  with its own librdkafka consumer assigned to one range.
- A stream reader lives on the driver for the whole query (`initialOffset`, `latestOffset`,
  `partitions`); Spark journals each micro-batch's end offsets in the checkpoint, so a restarted
  query resumes exactly where the last committed batch ended. Tasks read ranges as in batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, cast

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from . import options as opts
from .client import OffsetReader, client_config, librdkafka_config, retry
from .options import IllegalArgumentException, KafkaDataLossException, TopicPartition

log = logging.getLogger("rafka.spark")

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
SCHEMA_WITH_HEADERS = StructType([*SCHEMA.fields, StructField("headers", HEADERS_TYPE)])

# Options only a read takes: when one is given, schema() validates the read options, so a bad
# option fails where the DataFrame is defined, as with the official connector.
_READ_ONLY_KEYS = (
    *opts.STRATEGY_OPTION_KEYS,
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "maxoffsetspertrigger",
    "minpartitions",
    "maxrecordsperpartition",
)


def kafka_schema(include_headers: bool) -> StructType:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


class KafkaDataSource(DataSource):
    """format("kafka"): read, readStream, write and writeStream."""

    @classmethod
    def name(cls) -> str:
        return "kafka"

    def schema(self) -> StructType:
        if any(k in self.options for k in _READ_ONLY_KEYS):
            opts.validate_general(self.options)
        return kafka_schema(opts.parse_bool(self.options, "includeheaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from .sink import KafkaBatchWriter

        return KafkaBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from .sink import KafkaStreamWriter

        return KafkaStreamWriter(dict(self.options), schema)


# -- offset ranges -------------------------------------------------------------------------------


class KafkaInputPartition(InputPartition):
    """One Spark task: offsets [start, end) of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def split_ranges(
    ranges: list[tuple[str, int, int, int]],
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[KafkaInputPartition]:
    """KafkaOffsetRangeCalculator: one task per Kafka partition, unless minPartitions asks for
    more tasks (large ranges are split in proportion to their size) or maxRecordsPerPartition
    caps a task's range."""
    ranges = [r for r in ranges if r[3] - r[2] > 0]
    out: list[tuple[str, int, int, int]]
    if min_partitions is None or len(ranges) >= min_partitions:
        out = list(ranges)
    else:
        total = sum(e - s for _, _, s, e in ranges)

        def part_count(size: int, total_size: int, min_parts: int) -> int:
            return max(round(size / total_size * min_parts), 1)

        unsplit = {(t, p) for t, p, s, e in ranges if part_count(e - s, total, min_partitions) == 1}
        unsplit_total = sum(e - s for t, p, s, e in ranges if (t, p) in unsplit)
        split_total = total - unsplit_total
        split_min = max(min_partitions - len(unsplit), 1)
        out = []
        for t, p, s, e in ranges:
            parts = 1 if (t, p) in unsplit else part_count(e - s, split_total, split_min)
            remaining, start = e - s, s
            for i in range(parts):
                this = remaining // (parts - i)
                remaining -= this
                end = min(start + this, e)
                out.append((t, p, start, end))
                start = end
        out = [r for r in out if r[3] - r[2] > 0]
    if max_records_per_partition is not None:
        capped: list[tuple[str, int, int, int]] = []
        for t, p, s, e in out:
            n = -(-(e - s) // max_records_per_partition)
            size = -(-(e - s) // n)
            capped.extend((t, p, a, min(a + size, e)) for a in range(s, e, size))
        out = capped
    return [KafkaInputPartition(*r) for r in out]


class _ReadContext:
    """What a task needs to read a range: picklable, no client inside."""

    def __init__(self, options: Mapping[str, str], schema: StructType, group_id: str) -> None:
        self.params = opts.kafka_params(options)
        self.fail_on_data_loss = opts.parse_bool(options, "failondataloss", True)
        self.include_headers = "headers" in schema.fieldNames()
        self.schema = schema
        self.poll_timeout_ms = opts.parse_int(options, "kafkaconsumer.polltimeoutms") or 120_000
        self.group_id = self.params.get("group.id", group_id)
        self.max_batch_rows = 10_000


def _data_loss(ctx: _ReadContext, sub_class: str, reason: str) -> None:
    if ctx.fail_on_data_loss:
        raise KafkaDataLossException(sub_class, reason)
    log.warning(
        "%s. Some data may have been lost because they are not available in Kafka any more; "
        "the source option failOnDataLoss is false, so the query goes on.",
        reason,
    )


def read_range(ctx: _ReadContext, part: KafkaInputPartition) -> Iterator[Any]:
    """Yield Arrow record batches with the records of part's offset range."""
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(ctx.schema, timezone="UTC")
    conf = {
        **librdkafka_config(ctx.params, "consumer"),
        "group.id": ctx.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    }
    topic, partition, start, end = part.topic, part.partition, part.start, part.end
    consumer = Consumer(conf)
    tp = TopicPartition(topic, partition)
    try:
        low, _high = retry(
            lambda: consumer.get_watermark_offsets(tp, timeout=10.0),
            5,
            1000,
            f"watermarks of {topic}-{partition}",
        )
        if start < low:
            _data_loss(
                ctx,
                "COULD_NOT_READ_OFFSET_RANGE",
                f"Could not read records in offset [{start}, {end}) for topic partition "
                f"{topic}-{partition} with consumer group {ctx.group_id}: the earliest offset is "
                f"now {low}.",
            )
            start = low
        if start >= end:
            return
        consumer.assign([TopicPartition(topic, partition, start)])
        cols: dict[str, list] = {n: [] for n in arrow_schema.names}
        next_off = start
        deadline = time.monotonic() + ctx.poll_timeout_ms / 1000
        while next_off < end:
            msgs = consumer.consume(
                num_messages=min(ctx.max_batch_rows, end - next_off), timeout=1.0
            )
            progressed = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        eof_at = m.offset()
                        assert eof_at is not None  # a partition EOF is reported at an offset
                        if eof_at >= end:
                            # Offsets up to `end` hold no more records (compaction, control
                            # batches): the range is done.
                            next_off = end
                        continue
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, _ = consumer.get_watermark_offsets(tp, timeout=10.0)
                        _data_loss(
                            ctx,
                            "COULD_NOT_READ_OFFSET_RANGE",
                            f"Could not read records in offset [{next_off}, {end}) for topic "
                            f"partition {topic}-{partition} with consumer group "
                            f"{ctx.group_id}: the earliest offset is now {low}.",
                        )
                        next_off = max(next_off, low)
                        if next_off >= end:
                            break
                        consumer.assign([TopicPartition(topic, partition, next_off)])
                        continue
                    if err.retriable() or code in (
                        KafkaError._TRANSPORT,
                        KafkaError._ALL_BROKERS_DOWN,
                        KafkaError.NOT_LEADER_FOR_PARTITION,
                        KafkaError.LEADER_NOT_AVAILABLE,
                    ):
                        log.info("retriable error reading %s-%s: %s", topic, partition, err)
                        continue
                    raise KafkaException(err)
                off = m.offset()
                assert off is not None  # a record always has its offset
                if off < next_off:
                    continue
                if off >= end:
                    next_off = end
                    break
                ts_type, ts = m.timestamp()
                cols["key"].append(m.key())
                cols["value"].append(m.value())
                cols["offset"].append(off)
                # A record without a timestamp has -1 (librdkafka's and the Java client's
                # NO_TIMESTAMP): epoch - 1 ms, as the official connector's
                # java.sql.Timestamp(-1) gives. Types: librdkafka 1 create time, 2 log append
                # time, 0 none; Java ids 0, 1, -1.
                cols["timestamp"].append(ts * 1000)
                cols["timestampType"].append(ts_type - 1 if ts_type else -1)
                if ctx.include_headers:
                    # A consumed record's headers are (key, value) pairs; the stub's
                    # HeadersType also has the dict form only produce() takes.
                    hs = cast("list[tuple[str, bytes | None]] | None", m.headers())
                    cols["headers"].append([{"key": k, "value": v} for k, v in hs] if hs else None)
                next_off = off + 1
                progressed = True
            if progressed:
                deadline = time.monotonic() + ctx.poll_timeout_ms / 1000
            if len(cols["offset"]) >= ctx.max_batch_rows:
                yield _batch(pa, arrow_schema, cols, topic, partition)
                cols = {n: [] for n in arrow_schema.names}
            if next_off < end and not progressed and time.monotonic() > deadline:
                low, high = consumer.get_watermark_offsets(tp, timeout=10.0)
                if high < end:
                    _data_loss(
                        ctx,
                        "COULD_NOT_READ_OFFSET_RANGE",
                        f"Could not read records in offset [{next_off}, {end}) for topic "
                        f"partition {topic}-{partition} with consumer group {ctx.group_id}: "
                        f"the latest offset is now {high}.",
                    )
                    break
                raise TimeoutError(
                    f"Cannot fetch record for offset {next_off} in {ctx.poll_timeout_ms} "
                    "milliseconds"
                )
        if cols["offset"]:
            yield _batch(pa, arrow_schema, cols, topic, partition)
    finally:
        consumer.close()


def _batch(pa: Any, schema: Any, cols: dict[str, list], topic: str, partition: int) -> Any:
    n = len(cols["offset"])
    cols["topic"] = [topic] * n
    cols["partition"] = [partition] * n
    arrays = [pa.array(cols[f.name], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# -- batch ---------------------------------------------------------------------------------------


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.start_spec, self.end_spec = opts.validate_batch(options)
        self.strategy = opts.strategy(options)
        prefix = options.get("groupidprefix", "spark-kafka-relation")
        self.ctx = _ReadContext(options, schema, f"{prefix}-{uuid.uuid4()}")
        self.min_partitions = opts.parse_int(options, "minpartitions")
        self.max_records = opts.parse_int(options, "maxrecordsperpartition")
        self.offset_reader = _offset_reader(options)
        client_config(self.ctx.params, "consumer")

    def partitions(self) -> list[InputPartition]:
        try:
            reader = self.offset_reader
            tps, start, end = reader.assigned(
                self.strategy,
                lambda tps: (
                    tps,
                    reader.resolve(self.start_spec, tps, True, "startingOffsets"),
                    reader.resolve(self.end_spec, tps, False, "endingOffsets"),
                ),
            )
        finally:
            self.offset_reader.close()
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s > e:
                raise IllegalArgumentException(
                    f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset "
                    f"{s} is greater than the resolved end offset {e} for topic {tp[0]} "
                    f"partition {tp[1]}."
                )
            ranges.append((tp[0], tp[1], s, e))
        return list(split_ranges(ranges, self.min_partitions, self.max_records))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # no data at all: Spark's placeholder partition
        return read_range(self.ctx, partition)


def _offset_reader(options: Mapping[str, str]) -> OffsetReader:
    return OffsetReader(
        opts.kafka_params(options),
        retries=opts.parse_int(options, "fetchoffset.numretries") or 3,
        retry_interval_ms=opts.parse_int(options, "fetchoffset.retryintervalms") or 1000,
    )


# -- streaming -----------------------------------------------------------------------------------


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offset ranges; offsets are the connector's JSON."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.start_spec = opts.validate_stream(options)
        self.strategy = opts.strategy(options)
        prefix = options.get("groupidprefix", "spark-kafka-source")
        self.ctx = _ReadContext(options, schema, f"{prefix}-{uuid.uuid4()}-executor")
        self.min_partitions = opts.parse_int(options, "minpartitions")
        self.max_offsets_per_trigger = opts.parse_int(options, "maxoffsetspertrigger")
        self.offset_reader = _offset_reader(options)
        self.initial: dict[TopicPartition, int] | None = None
        # Partitions whose initial offset is the latest one when the query started.
        self.initial_latest: set[TopicPartition] = set()
        self.latest: dict[TopicPartition, int] | None = None
        self.available_now_target: dict[TopicPartition, int] | None = None
        client_config(self.ctx.params, "consumer")

    def _initial_offsets(self) -> dict[TopicPartition, int]:
        """Where a new query starts, resolved at the first call, when the query starts, as the
        official connector's initialOffset does: "latest", "earliest" and timestamps become
        offsets then, so records produced before the first micro-batch are read. Spark asks
        again (when planning batch 0 and when running it) on this same reader, and gets the
        same offsets. (The official connector also writes them to <checkpoint>/sources; a
        Python source does not see its checkpoint: see `partitions` for a restart before
        batch 0 commits.)"""
        if self.initial is None:
            marked = self.offset_reader.assigned(
                self.strategy,
                lambda tps: self.offset_reader.resolve(
                    self.start_spec, tps, True, "startingOffsets", markers=True
                ),
            )
            self.initial_latest = {tp for tp, off in marked.items() if off == opts.LATEST}
            self.initial = self.offset_reader.pin(marked)
            log.info("initial offsets: %s", self.initial)
        return self.initial

    def initialOffset(self) -> dict:
        return opts.offsets_json(self._initial_offsets())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._initial_offsets()  # a new query's start comes first, as in the official one
        self.available_now_target = self.offset_reader.assigned(
            self.strategy, self.offset_reader.latest
        )

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = opts.offsets_from_json(start)
        if self.available_now_target is not None:
            latest = dict(self.available_now_target)
        else:
            latest = self._fetch_latest(begin)
        self.latest = latest
        lost = set(begin) - set(latest)
        if lost:
            _data_loss(
                self.ctx,
                "PARTITIONS_DELETED",
                f"Partitions {opts.format_partitions(lost)} have been deleted.",
            )
        if isinstance(limit, ReadMaxRows):
            # Partitions that appeared since `start` are read from their earliest offset.
            new = [tp for tp in latest if tp not in begin]
            begin = {**self.offset_reader.earliest(new), **begin}
            return opts.offsets_json(self._rate_limit(limit.max_rows, begin, latest))
        # A log end behind what was already read (a truncated log) stays as it is:
        # partitions() reports the data loss, and the next batch starts from the new end.
        return opts.offsets_json(latest)

    def _fetch_latest(self, begin: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Latest offsets; re-fetched while some partition reports less than what was already
        read, as the official connector does (a new leader's high watermark can lag behind for
        a moment after a failover)."""
        reader = self.offset_reader
        attempt = 0
        while True:
            latest = reader.assigned(self.strategy, reader.latest)
            behind = [tp for tp, off in begin.items() if tp in latest and latest[tp] < off]
            if not behind or attempt >= reader.retries:
                return latest
            attempt += 1
            log.warning("latest offsets %s are behind %s; retrying", behind, begin)
            time.sleep(reader.retry_interval_ms / 1000)

    @staticmethod
    def _rate_limit(
        limit: int, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """KafkaMicroBatchStream.rateLimit: share `limit` records among partitions in
        proportion to their backlog, giving each partition with a backlog at least one."""
        sizes = {
            tp: end - begin[tp] for tp, end in latest.items() if tp in begin and end > begin[tp]
        }
        total = sum(sizes.values())
        if total < 1:
            return dict(latest)
        out = {}
        for tp, end in latest.items():
            if tp not in sizes:
                out[tp] = end
                continue
            prorate = limit * (sizes[tp] / total)
            n = int(-(-prorate // 1)) if prorate < 1 else int(prorate)
            out[tp] = min(end, begin[tp] + n)
        return out

    def reportLatestOffset(self) -> dict | None:
        return None if self.latest is None else opts.offsets_json(self.latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = opts.offsets_from_json(start)
        until = opts.offsets_from_json(end)
        if begin == self.initial:
            self._replayed_first_batch(begin, until)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self._added_partitions(new))
        ranges = []
        for tp, e in sorted(until.items()):
            if tp not in begin:
                continue  # no initial offset: reported by _added_partitions
            s = begin[tp]
            if e < s:
                _data_loss(
                    self.ctx,
                    "PARTITION_OFFSET_CHANGED",
                    f"Partition {tp[0]}-{tp[1]} offset was changed from {s} to {e}.",
                )
                continue
            ranges.append((tp[0], tp[1], s, e))
        return list(split_ranges(ranges, self.min_partitions, None))

    def _replayed_first_batch(
        self, begin: dict[TopicPartition, int], until: dict[TopicPartition, int]
    ) -> None:
        """Batch 0 from this run's initial offsets. If a query started at "latest" stopped
        before batch 0 committed, Spark replays batch 0 up to the end it journaled, but from
        the initial offsets of the restarted run (the official connector keeps the first
        run's in its checkpoint): where the latest offset has moved past that end, batch 0
        is replayed empty and the query goes on from its end."""
        for tp in sorted(self.initial_latest):
            if tp in until and begin[tp] > until[tp]:
                log.warning(
                    "%s-%s: the query restarted before its first micro-batch committed; that "
                    "batch ended at offset %d, before the latest offset %d this run started "
                    "from, so it is replayed without the records it had read",
                    tp[0],
                    tp[1],
                    until[tp],
                    begin[tp],
                )
                begin[tp] = until[tp]

    def _added_partitions(self, new: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Partitions that appeared since the previous batch start at their earliest offset;
        one that does not start at 0 (or has none) is data loss, as in the official
        connector."""
        from confluent_kafka import KafkaException

        try:
            found = self.offset_reader.earliest(new)
        except KafkaException as e:
            log.warning(
                "no earliest offsets for added partitions %s: %s", opts.format_partitions(new), e
            )
            found = {}
        missing = set(new) - set(found)
        if missing:
            _data_loss(
                self.ctx,
                "INITIAL_OFFSET_NOT_FOUND_FOR_PARTITIONS",
                f"Cannot find initial offsets for partitions {opts.format_partitions(missing)}. "
                "They may have been deleted.",
            )
        for tp, off in sorted(found.items()):
            if off != 0:
                _data_loss(
                    self.ctx,
                    "ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
                    f"Added partition {tp[0]}-{tp[1]} starts from {off} instead of 0.",
                )
        log.info("partitions added: %s", found)
        return found

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition)
        return read_range(self.ctx, partition)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        self.offset_reader.close()
