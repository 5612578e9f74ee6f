#!/usr/bin/env python3
"""Driver for the Python clients — confluent-kafka (librdkafka), kafka-python and aiokafka —
with the same command-line contract as the other drivers (README.md in this folder):

    python_driver.py <confluent|kafka-python|aiokafka> <command> --bootstrap B --topic T ...

All Kafka requests are made by the named client; this file only drives it and prints the
contract's JSON lines (binary fields as latin-1 strings).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drivers import EXIT_FAILED, EXIT_TOPIC_EXISTS, record


def emit(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def s(b: bytes | None) -> str | None:
    return None if b is None else b.decode("latin-1")


def fail(msg: str) -> None:
    print(f"python_driver: {msg}", file=sys.stderr)
    sys.exit(EXIT_FAILED)


def consumed(
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: list,
    timestamp: int,
    ts_type: str,
) -> None:
    emit(
        {
            "partition": partition,
            "offset": offset,
            "key": s(key),
            "value": s(value),
            "headers": [[k, s(v)] for k, v in headers or []],
            "timestamp": timestamp,
            "timestamp_type": ts_type,
        }
    )


# --------------------------------------------------------------------------- confluent-kafka


def confluent(cmd: str, a: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = {"bootstrap.servers": a.bootstrap}
    if cmd == "create-topic":
        admin = AdminClient(conf)  # keep a reference: a collected client cancels its futures
        fut = admin.create_topics([NewTopic(a.topic, a.partitions, a.replication_factor)])
        try:
            fut[a.topic].result(a.timeout)
        except Exception as e:
            err = e.args[0] if e.args else None
            if getattr(err, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                sys.exit(EXIT_TOPIC_EXISTS)
            fail(f"create-topic: {e}")
    elif cmd == "produce":
        p = Producer(
            conf | {"acks": a.acks, "compression.type": a.compression, "enable.idempotence": False}
        )
        errors: list[str] = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                emit(
                    {
                        "key": msg.key().decode(),
                        "partition": msg.partition(),
                        "offset": msg.offset(),
                        "timestamp": msg.timestamp()[1],
                    }
                )

        for i in range(a.count):
            r = record(i, a.start_ts)
            p.produce(
                a.topic,
                r.value,
                r.key,
                headers=r.headers,
                timestamp=r.timestamp,
                on_delivery=report,
            )
            p.poll(0)
        if p.flush(a.timeout) or errors:
            fail(f"undelivered records; errors: {errors[:3]}")
    elif cmd == "consume":
        c = Consumer(conf | {"group.id": "python-driver", "enable.auto.commit": False})
        parts = c.list_topics(a.topic, a.timeout).topics[a.topic].partitions
        c.assign([TopicPartition(a.topic, p, -2) for p in parts])  # -2: OFFSET_BEGINNING
        names = {0: "NoTimestampType", 1: "CreateTime", 2: "LogAppendTime"}
        got, deadline = 0, time.monotonic() + a.timeout
        while got < a.expect and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error():
                    fail(f"consume: {m.error()}")
                ts_type, ts = m.timestamp()
                consumed(
                    m.partition(), m.offset(), m.key(), m.value(), m.headers(), ts, names[ts_type]
                )
                got += 1
        c.close()
    elif cmd == "offsets-for-times":
        c = Consumer(conf | {"group.id": "python-driver"})
        parts = c.list_topics(a.topic, a.timeout).topics[a.topic].partitions
        res = c.offsets_for_times(
            [TopicPartition(a.topic, p, a.timestamp) for p in parts], a.timeout
        )
        emit({str(tp.partition): tp.offset for tp in res})
        c.close()


# --------------------------------------------------------------------------- kafka-python


def kafka_python(cmd: str, a: argparse.Namespace) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    if cmd == "create-topic":
        admin = KafkaAdminClient(bootstrap_servers=a.bootstrap)
        try:
            admin.create_topics(
                [NewTopic(a.topic, a.partitions, a.replication_factor)], timeout_ms=a.timeout * 1000
            )
        except TopicAlreadyExistsError:
            sys.exit(EXIT_TOPIC_EXISTS)
        admin.close()
    elif cmd == "produce":
        acks = {"-1": "all", "0": 0, "1": 1}[a.acks]
        codec = None if a.compression == "none" else a.compression
        p = KafkaProducer(
            bootstrap_servers=a.bootstrap,
            acks=acks,
            compression_type=codec,
            enable_idempotence=False,
        )
        futures = []
        for i in range(a.count):
            r = record(i, a.start_ts)
            futures.append(
                (
                    r.key,
                    p.send(a.topic, r.value, r.key, headers=r.headers, timestamp_ms=r.timestamp),
                )
            )
        p.flush(a.timeout)
        for key, f in futures:
            md = f.get(a.timeout)
            emit(
                {
                    "key": key.decode(),
                    "partition": md.partition,
                    "offset": md.offset,
                    "timestamp": md.timestamp,
                }
            )
        p.close()
    elif cmd == "consume":
        c = KafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False)
        parts = [TopicPartition(a.topic, p) for p in sorted(c.partitions_for_topic(a.topic) or [])]
        if not parts:
            fail(f"no partitions for {a.topic}")
        c.assign(parts)
        c.seek_to_beginning()
        got, deadline = 0, time.monotonic() + a.timeout
        while got < a.expect and time.monotonic() < deadline:
            for batch in c.poll(500).values():
                for m in batch:
                    ts_type = "LogAppendTime" if m.timestamp_type == 1 else "CreateTime"
                    consumed(m.partition, m.offset, m.key, m.value, m.headers, m.timestamp, ts_type)
                    got += 1
        c.close()
    elif cmd == "offsets-for-times":
        c = KafkaConsumer(bootstrap_servers=a.bootstrap)
        parts = [TopicPartition(a.topic, p) for p in sorted(c.partitions_for_topic(a.topic) or [])]
        res = c.offsets_for_times({tp: a.timestamp for tp in parts})
        emit({str(tp.partition): (o.offset if o else -1) for tp, o in res.items()})
        c.close()


# --------------------------------------------------------------------------- aiokafka


async def aiokafka_main(cmd: str, a: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    if cmd == "create-topic":
        admin = AIOKafkaAdminClient(bootstrap_servers=a.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(a.topic, a.partitions, a.replication_factor)])
        except TopicAlreadyExistsError:
            sys.exit(EXIT_TOPIC_EXISTS)
        finally:
            await admin.close()
    elif cmd == "produce":
        acks = {"-1": "all", "0": 0, "1": 1}[a.acks]
        codec = None if a.compression == "none" else a.compression
        p = AIOKafkaProducer(bootstrap_servers=a.bootstrap, acks=acks, compression_type=codec)
        await p.start()
        try:
            futures = []
            for i in range(a.count):
                r = record(i, a.start_ts)
                fut = await p.send(
                    a.topic, r.value, r.key, headers=r.headers, timestamp_ms=r.timestamp
                )
                futures.append((r.key, fut))
            for (key, fut), i in zip(futures, range(a.count), strict=True):
                md = await asyncio.wait_for(fut, a.timeout)
                # aiokafka's CreateTime metadata timestamp is its own bookkeeping (and can be off
                # by a record); only LogAppendTime comes from the broker.
                ts = md.timestamp if md.timestamp_type == 1 else record(i, a.start_ts).timestamp
                emit(
                    {
                        "key": key.decode(),
                        "partition": md.partition,
                        "offset": md.offset,
                        "timestamp": ts,
                    }
                )
        finally:
            await p.stop()
    elif cmd in ("consume", "offsets-for-times"):
        c = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            parts = [
                TopicPartition(a.topic, p) for p in sorted(c.partitions_for_topic(a.topic) or [])
            ]
            if not parts:
                await c._client.force_metadata_update()
                parts = [
                    TopicPartition(a.topic, p)
                    for p in sorted(c.partitions_for_topic(a.topic) or [])
                ]
            if cmd == "offsets-for-times":
                res = await c.offsets_for_times({tp: a.timestamp for tp in parts})
                emit({str(tp.partition): (o.offset if o else -1) for tp, o in res.items()})
                return
            c.assign(parts)
            await c.seek_to_beginning()
            got, deadline = 0, time.monotonic() + a.timeout
            while got < a.expect and time.monotonic() < deadline:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    for m in batch:
                        ts_type = "LogAppendTime" if m.timestamp_type == 1 else "CreateTime"
                        consumed(
                            m.partition, m.offset, m.key, m.value, m.headers, m.timestamp, ts_type
                        )
                        got += 1
        finally:
            await c.stop()


CLIENTS: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "confluent": confluent,
    "kafka-python": kafka_python,
    "aiokafka": lambda cmd, a: asyncio.run(aiokafka_main(cmd, a)),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=CLIENTS)
    ap.add_argument("command", choices=["create-topic", "produce", "consume", "offsets-for-times"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replication-factor", type=int, default=1)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    ap.add_argument("--acks", default="-1", choices=["-1", "0", "1"])
    ap.add_argument("--start-ts", type=int, default=None)
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--timestamp", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    if a.start_ts is None:
        a.start_ts = int(time.time() * 1000)
    CLIENTS[a.client](a.command, a)


if __name__ == "__main__":
    main()
