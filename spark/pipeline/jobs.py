"""The order pipeline: revenue per store over event-time windows.

Both jobs read the `orders` topic with Spark's Kafka source (`format("kafka")`, standard options
only), parse the JSON, and aggregate per store over tumbling event-time windows. Results go to
Parquet and, as JSON keyed "<store>|<window start>", to a results topic.

- Batch (`run_batch`): one pass over an offset range (earliest..latest by default).
- Streaming (`start_streaming`): micro-batches with a watermark; in append mode a window is
  emitted once, after the watermark passes its end, and later events for it are dropped. Each
  micro-batch's rows go to `<output>/batch_id=<n>` (overwritten if Spark replays the batch
  after a failure, so Parquet output is exactly-once) and then to the results topic (at least
  once, keyed, so a replayed batch rewrites the same keys with the same values).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

ORDER_SCHEMA = StructType(
    [
        StructField("order_id", StringType()),
        StructField("store", StringType()),
        StructField("sku", StringType()),
        StructField("quantity", IntegerType()),
        StructField("amount_cents", LongType()),
        StructField("event_time", StringType()),
    ]
)

RESULT_COLUMNS = ("window_start", "window_end", "store", "orders", "items", "revenue_cents")


def kafka_reader(reader: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """`spark.read` or `spark.readStream`, pointed at Kafka with the connector's options."""
    r = reader.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    r = r.option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def parse_orders(kafka_df: DataFrame) -> DataFrame:
    """Kafka rows -> orders; records that are not order JSON are dropped."""
    o = F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o")
    return (
        kafka_df.select(o)
        .select(
            "o.order_id",
            "o.store",
            "o.sku",
            "o.quantity",
            "o.amount_cents",
            F.to_timestamp("o.event_time").alias("event_time"),
        )
        .where(F.col("order_id").isNotNull() & F.col("event_time").isNotNull())
    )


def aggregate_orders(
    orders: DataFrame, window: str = "1 minute", watermark: str = "30 seconds"
) -> DataFrame:
    w = F.window("event_time", window)
    return (
        orders.withWatermark("event_time", watermark)
        .groupBy(w.alias("w"), "store")
        .agg(
            F.count(F.lit(1)).alias("orders"),
            F.sum("quantity").cast("long").alias("items"),
            F.sum("amount_cents").cast("long").alias("revenue_cents"),
        )
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "store",
            "orders",
            "items",
            "revenue_cents",
        )
    )


def to_kafka_records(results: DataFrame) -> DataFrame:
    """key "<store>|<window start>", value the row as JSON."""
    start = F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return results.select(
        F.concat_ws("|", "store", start).alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in RESULT_COLUMNS])).alias("value"),
    )


def write_results_topic(results: DataFrame, bootstrap: str, topic: str) -> None:
    (
        to_kafka_records(results)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )


def run_batch(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    output_path: str,
    results_topic: str | None = None,
    window: str = "1 minute",
    **read_options: str,
) -> DataFrame:
    """Aggregate the orders in [startingOffsets, endingOffsets) (default: all of them); returns
    the results as written to Parquet."""
    raw = kafka_reader(spark.read, bootstrap, topic, **read_options).load()
    results = aggregate_orders(parse_orders(raw), window)
    results.write.mode("overwrite").parquet(output_path)
    # Read back what was written: the Kafka output is then the same snapshot as the Parquet
    # one, whatever arrived in the topic meanwhile.
    written = spark.read.parquet(output_path)
    if results_topic:
        write_results_topic(written, bootstrap, results_topic)
    return written


def start_streaming(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    output_path: str,
    checkpoint: str,
    results_topic: str | None = None,
    window: str = "1 minute",
    watermark: str = "30 seconds",
    trigger: str = "1 second",
    query_name: str | None = None,
    **read_options: str,
) -> Any:
    read_options.setdefault("startingOffsets", "earliest")
    raw = kafka_reader(spark.readStream, bootstrap, topic, **read_options).load()
    results = aggregate_orders(parse_orders(raw), window, watermark)

    def sink(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            if batch.isEmpty():
                return
            batch.write.mode("overwrite").parquet(f"{output_path}/batch_id={batch_id}")
            if results_topic:
                write_results_topic(batch, bootstrap, results_topic)
        finally:
            batch.unpersist()

    writer = (
        results.writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
    )
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()


def stop_gracefully(query: Any, timeout: float = 60.0) -> None:
    """Stop between micro-batches when possible: a stop that interrupts a running batch is
    safe (the batch is replayed from the checkpoint on restart) but rewrites its Kafka output."""
    import time

    deadline = time.monotonic() + timeout
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
