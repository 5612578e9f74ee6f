#!/usr/bin/env python3
"""Driver for the Python clients — confluent-kafka (librdkafka), kafka-python and aiokafka —
with the same command-line contract as the other drivers (README.md in this folder):

    python_driver.py <confluent|kafka-python|aiokafka> <command> --bootstrap B --topic T ...

All Kafka requests are made by the named client; this file only drives it and prints the
contract's JSON lines (binary fields as latin-1 strings). Security settings come from
$RAFKA_CLIENT_SECURITY (README.md, "Security"), mapped to each client's own settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drivers import EXIT_FAILED, EXIT_TOPIC_EXISTS, EXIT_UNSUPPORTED, EXIT_USAGE, record

_STDOUT = threading.Lock()
COMMAND = [""]  # the command being run (main sets it)


def emit(obj: object) -> None:
    # One write per line, under a lock: kafka-python calls the group listener (which emits
    # events too) on its IO thread.
    line = json.dumps(obj) + "\n"
    with _STDOUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def s(b: bytes | None) -> str | None:
    return None if b is None else b.decode("latin-1")


def fail(msg: str, error: str | None = None) -> None:
    """Exit 1; with `error` (Kafka's error name) the contract's error line goes to stdout."""
    print(f"python_driver: {msg}", file=sys.stderr)
    if error is not None:
        emit({"error": error, "message": msg})
    sys.exit(EXIT_FAILED)


# --------------------------------------------------------------------------- security


def security() -> dict:
    """$RAFKA_CLIENT_SECURITY (README.md, "Security"); {} = PLAINTEXT."""
    raw = os.environ.get("RAFKA_CLIENT_SECURITY", "").strip()
    return json.loads(raw) if raw else {}


def unsupported(what: str) -> None:
    print(f"python_driver: {what}", file=sys.stderr)
    sys.exit(EXIT_UNSUPPORTED)


# Clients are told a token lives an hour whatever its exp says: the broker judges it.
TOKEN_LIFETIME_S = 3600


def confluent_security(client: str = "confluent") -> dict:
    """librdkafka's settings for $RAFKA_CLIENT_SECURITY."""
    sec = security()
    conf: dict = {"security.protocol": sec.get("protocol", "PLAINTEXT")}
    if sec.get("ca"):
        conf["ssl.ca.location"] = sec["ca"]
    if sec.get("cert"):
        conf["ssl.certificate.location"] = sec["cert"]
        conf["ssl.key.location"] = sec["key"]
    if "mechanism" in sec:
        conf["sasl.mechanism"] = sec["mechanism"]
        if sec.get("tokenauth"):
            unsupported("librdkafka has no delegation tokens (SCRAM tokenauth extension)")
        if sec["mechanism"] == "OAUTHBEARER":
            conf["oauth_cb"] = lambda _config: (sec["token"], time.time() + TOKEN_LIFETIME_S)
        else:
            conf["sasl.username"] = sec["username"]
            conf["sasl.password"] = sec["password"]
    # An authentication failure is final: stop at once rather than retry until a timeout.
    conf["error_cb"] = _confluent_error
    return conf


def _confluent_error(err: object) -> None:
    name = confluent_error_name(err)
    if name in ("SASL_AUTHENTICATION_FAILED", "_SSL"):
        final_failure(name, str(err))


def final_failure(error: str, message: str) -> None:
    """A failure no retry mends (refused credentials): report it and exit at once, rather than
    let the client retry until a timeout. Called from client callbacks and IO threads, hence
    os._exit. group-consume reports it as a fatal error event."""
    print(f"python_driver: {message}", file=sys.stderr)
    if COMMAND[0] == "group-consume":
        event("error", error=error, message=message, fatal=True)
    else:
        emit({"error": error, "message": message})
    sys.stdout.flush()
    os._exit(EXIT_FAILED)


class AuthFailures(logging.Handler):
    """kafka-python and aiokafka log a refused SaslAuthenticate (error 58) and retry until a
    timeout, then raise an error that no longer says why: catch the refusal in their log."""

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        for arg in args:
            if isinstance(arg, Exception) and getattr(arg, "errno", None) == 58:
                final_failure("SASL_AUTHENTICATION_FAILED", str(arg))


def confluent_error_name(err: object) -> str:
    """librdkafka's error as Kafka's name: the broker's SaslAuthenticate failure reaches the
    application as the local _AUTHENTICATION error; its text says whether the broker refused."""
    name = err.name()  # type: ignore[attr-defined]
    if name == "_FENCED":  # its fatal error for PRODUCER_FENCED / INVALID_PRODUCER_EPOCH
        return "PRODUCER_FENCED"
    if name == "_AUTHENTICATION" and "SASL authentication error" in err.str():  # type: ignore[attr-defined]
        return "SASL_AUTHENTICATION_FAILED"
    return name


def python_security(client: str) -> dict:
    """kafka-python's and aiokafka's settings (same names but for SSL and the token provider)."""
    sec = security()
    kw: dict = {"security_protocol": sec.get("protocol", "PLAINTEXT")}
    log = logging.getLogger("aiokafka" if client == "aiokafka" else "kafka")
    if not any(isinstance(h, AuthFailures) for h in log.handlers):
        log.addHandler(AuthFailures())
    if sec.get("tokenauth"):
        unsupported(f"{client} has no delegation tokens (SCRAM tokenauth extension)")
    if "mechanism" in sec:
        kw["sasl_mechanism"] = sec["mechanism"]
        if sec["mechanism"] == "OAUTHBEARER":
            kw["sasl_oauth_token_provider"] = token_provider(client, sec["token"])
        else:
            kw["sasl_plain_username"] = sec["username"]
            kw["sasl_plain_password"] = sec["password"]
    if kw["security_protocol"] in ("SSL", "SASL_SSL"):
        if client == "aiokafka":
            from aiokafka.helpers import create_ssl_context

            kw["ssl_context"] = create_ssl_context(
                cafile=sec.get("ca"), certfile=sec.get("cert"), keyfile=sec.get("key")
            )
        else:
            kw |= {"ssl_cafile": sec.get("ca"), "ssl_certfile": sec.get("cert")}
            kw["ssl_keyfile"] = sec.get("key")
    return kw


def token_provider(client: str, token: str) -> object:
    if client == "aiokafka":
        from aiokafka.abc import AbstractTokenProvider

        class AsyncStatic(AbstractTokenProvider):
            async def token(self) -> str:
                return token

        return AsyncStatic()
    from kafka.net.sasl.oauth import AbstractTokenProvider as SyncProvider

    class Static(SyncProvider):
        def token(self) -> str:
            return token

    return Static()


def python_settings(a: argparse.Namespace, client: str) -> dict:
    """bootstrap_servers and the security settings (kafka-python, aiokafka)."""
    return {"bootstrap_servers": a.bootstrap} | python_security(client)


def isolation(a: argparse.Namespace, name: str) -> dict[str, str]:
    """--isolation-level under the client's name for it; absent: the client's own default."""
    return {name: a.isolation_level} if a.isolation_level else {}


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


def confluent_partitions(client: object, a: argparse.Namespace) -> dict:
    """The topic's partitions from metadata; a topic error (e.g. TOPIC_AUTHORIZATION_FAILED)
    fails the command."""
    topic = client.list_topics(a.topic, a.timeout).topics[a.topic]  # type: ignore[attr-defined]
    if topic.error is not None:
        fail(f"topic {a.topic}: {topic.error}", confluent_error_name(topic.error))
    return topic.partitions


def confluent(cmd: str, a: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = {"bootstrap.servers": a.bootstrap} | confluent_security()
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
        errors: list = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)
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
            first = confluent_error_name(errors[0]) if errors else "TIMEOUT"
            fail(f"undelivered records; errors: {[str(e) for e in errors[:3]]}", first)
    elif cmd == "consume":
        c = Consumer(
            conf
            | {"group.id": "python-driver", "enable.auto.commit": False}
            | isolation(a, "isolation.level")
        )
        parts = confluent_partitions(c, a)
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
        parts = confluent_partitions(c, a)
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
        admin = KafkaAdminClient(**python_settings(a, "kafka-python"))
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
            **python_settings(a, "kafka-python"),
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
        c = KafkaConsumer(
            **python_settings(a, "kafka-python"),
            enable_auto_commit=False,
            **isolation(a, "isolation_level"),
        )
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
        c = KafkaConsumer(**python_settings(a, "kafka-python"))
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
        admin = AIOKafkaAdminClient(**python_settings(a, "aiokafka"))
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
        p = AIOKafkaProducer(**python_settings(a, "aiokafka"), acks=acks, compression_type=codec)
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
        c = AIOKafkaConsumer(
            **python_settings(a, "aiokafka"),
            enable_auto_commit=False,
            **isolation(a, "isolation_level"),
        )
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


# --------------------------------------------------------------------------- consumer groups
#
# group-consume runs one member of a consumer group (subscribe) and prints what happens to it as
# JSON events; describe-group, committed and commit look at / write a group's offsets from
# outside. Contract: README.md ("Consumer groups").

GROUP_COMMANDS = ("group-consume", "describe-group", "committed", "commit")


def now_ms() -> int:
    return int(time.time() * 1000)


def event(kind: str, **fields: object) -> None:
    emit({"event": kind, **fields, "t": now_ms()})


def parse_pairs(spec: str | None) -> dict[int, int]:
    """``"P:O,P:O"`` -> {P: O}."""
    out = {}
    for item in (spec or "").split(","):
        if item.strip():
            p, o = item.split(":")
            out[int(p)] = int(o)
    return out


def parse_seeks(spec: str | None) -> dict[int, tuple[int, int | None]]:
    """``"P:O[@A],..."`` -> {P: (O, A or None)}: seek P to O at its record A (None: its first)."""
    out: dict[int, tuple[int, int | None]] = {}
    for item in (spec or "").split(","):
        if item.strip():
            p, rest = item.split(":")
            to, _, at = rest.partition("@")
            out[int(p)] = (int(to), int(at) if at else None)
    return out


def parse_ints(spec: str | None) -> set[int]:
    return {int(x) for x in (spec or "").split(",") if x.strip()}


def error_name(e: BaseException | None) -> str | None:
    """A client exception as Kafka's protocol error name (ILLEGAL_GENERATION, ...) when it
    carries one, else the exception's class name."""
    if e is None:
        return None
    err = e.args[0] if e.args else None
    if hasattr(err, "name") and callable(err.name):  # confluent_kafka.KafkaError
        return confluent_error_name(err)
    if hasattr(e, "name") and callable(e.name):
        return e.name()
    msg = getattr(type(e), "message", None)  # kafka-python / aiokafka broker errors
    if isinstance(msg, str) and msg.isupper():
        return msg
    return type(e).__name__


class Member:
    """Client-independent part of group-consume: when to stop, the --seek and --pause script
    (resumed by a ``resume`` line on stdin), what was processed (next offset per partition) and
    the events."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.stop = threading.Event()
        self.resume_asked = threading.Event()
        self.started = time.monotonic()
        self.records = 0
        self.owned: set[int] = set()
        self.next: dict[int, int] = {}  # partition -> offset after the last processed record
        self.seeks = parse_seeks(a.seek)
        self.pause = parse_ints(a.pause)
        self.paused: list[int] = []
        self.pause_state = "pending" if self.pause else "done"  # -> paused -> done
        if a.stop_on_eof == "true":
            threading.Thread(target=self._watch_stdin, daemon=True).start()

    def _watch_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
            if line.strip() == "resume":
                self.resume_asked.set()
        self.stop.set()

    def done(self) -> bool:
        a = self.a
        return (
            self.stop.is_set()
            or (a.max_records > 0 and self.records >= a.max_records)
            or (a.duration > 0 and time.monotonic() - self.started >= a.duration)
        )

    def assigned(
        self,
        parts,
        owned,
        pause: Callable[[list[int]], None],
        generation=None,
        member_id=None,
    ) -> None:
        """Reports an assignment, and pauses (with the client's ``pause``) what --pause wants
        paused once it is assigned."""
        self.owned = set(owned)
        event(
            "assigned",
            partitions=sorted(parts),
            owned=sorted(owned),
            generation=generation,
            member_id=member_id,
        )
        if self.pause_state == "pending" and self.pause & set(parts):
            self.pause_state = "paused"
            self.paused = sorted(self.pause & set(parts))
            pause(self.paused)
            event("paused", partitions=self.paused)

    def revoked(self, parts, owned, lost: bool = False) -> None:
        self.owned = set(owned)
        for p in parts:
            self.next.pop(p, None)
        event("lost" if lost else "revoked", partitions=sorted(parts), owned=sorted(owned))

    def seek_target(self, partition: int, offset: int) -> int | None:
        """--seek: the offset to seek to when this is the record the partition's seek waits
        for (None: no seek). A seek to the record's own offset only reports it."""
        target, at = self.seeks.get(partition, (None, None))
        if target is None or at not in (None, offset):
            return None
        del self.seeks[partition]
        event("seek", partition=partition, offset=target, at=offset)
        return None if target == offset else target

    def stall_ms(self) -> float:
        """Processing time of the next record: --process-ms, plus --stall-ms for the
        --stall-at'th record (a consumer stuck in processing)."""
        stall = self.a.stall_ms if self.records + 1 == self.a.stall_at else 0
        return self.a.process_ms + stall

    def processed(self, partition: int, offset: int, key: bytes | None) -> None:
        self.records += 1
        self.next[partition] = offset + 1
        event("record", partition=partition, offset=offset, key=s(key))

    def resume_if_asked(self, resume: Callable[[list[int]], None]) -> None:
        """Resumes the paused partitions (with the client's ``resume``) once stdin said so;
        called from the poll loop, the thread that owns the consumer."""
        if self.pause_state == "paused" and self.resume_asked.is_set():
            self.pause_state = "done"
            resume(self.paused)
            event("resumed", partitions=self.paused)

    def commit_due(self) -> bool:
        return self.a.commit == "offsets" and self.records % self.a.commit_every == 0

    def to_commit(self) -> dict[int, int]:
        """Processed positions of the owned partitions (what sync/async commit)."""
        return {p: o for p, o in self.next.items() if p in self.owned}


def commit_event(via: str, offsets: dict, error: str | None, errors: dict | None = None) -> None:
    fields = {"via": via, "offsets": {str(p): o for p, o in sorted(offsets.items())}}
    event("commit", **fields, error=error, partition_errors=errors or {})


# The duration options (seconds), by their argparse names.
DURATIONS = ["auto_commit_interval", "session_timeout", "heartbeat_interval", "max_poll_interval"]


def ms_settings(a: argparse.Namespace, options: list[str], sep: str) -> dict[str, int]:
    """The duration options given, in milliseconds, under the client's names for them:
    ``session_timeout`` -> librdkafka's ``session.timeout.ms`` (sep "."), kafka-python's and
    aiokafka's ``session_timeout_ms`` (sep "_")."""
    return {
        f"{o.replace('_', sep)}{sep}ms": int(getattr(a, o) * 1000) for o in options if getattr(a, o)
    }


def confluent_group(cmd: str, a: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    base = {"bootstrap.servers": a.bootstrap} | confluent_security()
    if cmd == "describe-group":
        admin = AdminClient(base)
        d = admin.describe_consumer_groups([a.group], request_timeout=a.timeout)[a.group]
        try:
            g = d.result(a.timeout)
        except KafkaException as e:
            emit({"group": a.group, "error": error_name(e)})
            return
        emit(
            {
                "group": g.group_id,
                "error": None,
                "state": state_name(g.state.name),
                "type": getattr(getattr(g, "type", None), "name", None),
                "protocol": g.partition_assignor,
                "coordinator": g.coordinator.id if g.coordinator else None,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "partitions": sorted(
                            [tp.topic, tp.partition] for tp in m.assignment.topic_partitions
                        ),
                    }
                    for m in g.members
                ],
            }
        )
        return
    if cmd == "committed":
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = AdminClient(base)
        parts = admin.list_topics(a.topic, timeout=a.timeout).topics[a.topic].partitions
        req = [ConsumerGroupTopicPartitions(a.group, [TopicPartition(a.topic, p) for p in parts])]
        res = admin.list_consumer_group_offsets(req, request_timeout=a.timeout)[a.group]
        try:
            got = res.result(a.timeout)
        except KafkaException as e:
            fail(f"committed: {e}")
        emit({str(tp.partition): max(tp.offset, -1) for tp in sorted(got.topic_partitions)})
        return
    if cmd == "commit":
        if a.member_id is not None or a.generation is not None:
            print("confluent: no API commits with a chosen member id/generation", file=sys.stderr)
            sys.exit(EXIT_UNSUPPORTED)
        # A consumer that is not a group member (generation -1, no member id), like assign().
        c = Consumer(base | {"group.id": a.group, "enable.auto.commit": False})
        offs = [TopicPartition(a.topic, p, o) for p, o in parse_pairs(a.offsets).items()]
        try:
            res = c.commit(offsets=offs, asynchronous=False)
            errs = {str(tp.partition): tp.error.name() if tp.error else None for tp in res}
            top = next((e for e in errs.values() if e), None)
        except KafkaException as e:
            top, errs = error_name(e), {}
        c.close()
        emit({"error": top, "partitions": errs})
        return

    # group-consume
    m = Member(a)
    conf = base | {
        "group.id": a.group,
        "auto.offset.reset": a.offset_reset,
        "enable.auto.commit": a.commit == "auto",
        # Offsets are stored for auto-commit only once a record is processed (at least once).
        "enable.auto.offset.store": False,
    }
    conf |= ms_settings(a, ["auto_commit_interval", "max_poll_interval"], ".")
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    if a.protocol == "consumer":
        # KIP-848: the broker assigns; session/heartbeat timeouts are the broker's settings.
        conf["group.protocol"] = "consumer"
        if a.assignor:
            conf["group.remote.assignor"] = a.assignor
    else:
        conf |= ms_settings(a, ["session_timeout", "heartbeat_interval"], ".")
        if a.assignor:
            conf["partition.assignment.strategy"] = a.assignor

    def on_commit(err: KafkaError | None, parts: list) -> None:
        if err is not None and err.code() == KafkaError._NO_OFFSET:
            return
        errs = {str(tp.partition): tp.error.name() for tp in parts if tp.error}
        commit_event(
            "callback",
            {tp.partition: tp.offset for tp in parts},
            err.name() if err else next(iter(errs.values()), None),
            errs,
        )

    conf["on_commit"] = on_commit

    def on_error(err: KafkaError) -> None:
        name = confluent_error_name(err)
        if name == "SASL_AUTHENTICATION_FAILED":
            final_failure(name, err.str())
        event("error", error=name, message=err.str())

    conf["error_cb"] = on_error
    c = Consumer(conf)

    def tps(parts) -> list:
        return [TopicPartition(a.topic, p) for p in parts]

    def commit_sync(offsets: dict[int, int], via: str) -> None:
        if not offsets:
            return
        try:
            res = c.commit(
                offsets=[TopicPartition(a.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
            errs = {str(tp.partition): tp.error.name() for tp in res if tp.error}
            commit_event(
                via, {tp.partition: tp.offset for tp in res}, next(iter(errs.values()), None), errs
            )
        except KafkaException as e:
            commit_event(via, offsets, error_name(e))

    # Incremental (cooperative) rebalancing: KIP-848 and the cooperative-sticky assignor.
    cooperative = a.protocol == "consumer" or a.assignor == "cooperative-sticky"

    def assignment(consumer) -> list[int]:
        try:
            return [tp.partition for tp in consumer.assignment()]
        except KafkaException:  # closing: librdkafka answers _DESTROY
            return []

    def on_assign(consumer, parts) -> None:
        consumer.incremental_assign(parts) if cooperative else consumer.assign(parts)
        owned = assignment(consumer)
        m.assigned(
            [tp.partition for tp in parts],
            owned,
            lambda ps: consumer.pause(tps(ps)),
            member_id=consumer.memberid(),
        )

    def on_revoke(consumer, parts, lost: bool = False) -> None:
        ps = [tp.partition for tp in parts]
        if not lost and a.commit in ("sync", "async"):
            commit_sync({p: o for p, o in m.to_commit().items() if p in ps}, "revoke")
        consumer.incremental_unassign(parts) if cooperative else consumer.unassign()
        m.revoked(ps, assignment(consumer), lost)

    c.subscribe(
        [a.topic],
        on_assign=on_assign,
        on_revoke=on_revoke,
        on_lost=lambda consumer, parts: on_revoke(consumer, parts, lost=True),
    )
    while not m.done():
        m.resume_if_asked(lambda ps: c.resume(tps(ps)))
        msgs = c.consume(100, 0.2)
        skip: set[int] = set()
        processed_any = False
        for msg in msgs:
            if msg.error():
                err = msg.error()
                event("error", error=err.name(), message=err.str())
                if err.fatal():
                    fail(f"fatal: {err}")
                continue
            p, o = msg.partition(), msg.offset()
            if p in skip:
                continue
            target = m.seek_target(p, o)
            if target is not None:
                c.seek(TopicPartition(a.topic, p, target))
                skip.add(p)  # the rest of this batch is from before the seek
                continue
            if m.stall_ms():
                time.sleep(m.stall_ms() / 1000)
            m.processed(p, o, msg.key())
            processed_any = True
            if a.commit == "auto":
                c.store_offsets(msg)
            elif m.commit_due():
                commit_sync({p: o + 1}, "offsets")
            if m.done():
                break
        if processed_any and a.commit == "sync":
            commit_sync(m.to_commit(), "sync")
        elif processed_any and a.commit == "async":
            offsets = m.to_commit()
            c.commit(
                offsets=[TopicPartition(a.topic, p, o) for p, o in offsets.items()],
                asynchronous=True,
            )
    if a.commit in ("sync", "async"):
        commit_sync(m.to_commit(), "close")
    c.close()  # leaves the group (a static member stays); auto-commit commits stored offsets
    event("closed", records=m.records)


def state_name(s: str) -> str:
    """Group state as Kafka spells it (Stable, PreparingRebalance, ...)."""
    fixed = {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }
    return fixed.get(s) or "".join(w.capitalize() for w in s.split("_"))


def consumer_settings(a: argparse.Namespace, assignors: dict[str, type], client: str) -> dict:
    """kafka-python's and aiokafka's group consumer settings (the two share the names)."""
    kw: dict = python_settings(a, client) | dict(
        group_id=a.group,
        auto_offset_reset=a.offset_reset,
        enable_auto_commit=a.commit == "auto",
    )
    kw |= ms_settings(a, DURATIONS, "_")
    if a.instance_id:
        kw["group_instance_id"] = a.instance_id
    if a.assignor:
        kw["partition_assignment_strategy"] = (assignors[a.assignor],)
    return kw


def to_process(
    m: Member, batches: dict, owns: Callable[[object], bool], seek: Callable[[object, int], None]
) -> Iterator[tuple]:
    """(partition, record) of a kafka-python or aiokafka poll that are to be processed. At a
    stop, a partition's first unprocessed record is sought back to (auto-commit must not pass
    it); at a --seek the rest of the partition's batch is from before it. ``owns``: whether the
    partition is still assigned (the rebalance runs on another thread / task)."""
    for part, msgs in batches.items():
        for msg in msgs:
            if m.done():
                if owns(part):
                    seek(part, msg.offset)
                break
            target = m.seek_target(part.partition, msg.offset)
            if target is not None:
                if owns(part):
                    seek(part, target)
                break
            yield part, msg


def kafka_python_pending_join_fix() -> None:
    """kafka-python 3.0.12 can drop out of its group for good: when a poll's timeout ends
    while its JoinGroup/SyncGroup is in flight, the next poll only goes back to that join if
    ``need_rejoin()`` is still true. A leader that rejoins because the metadata it assigned
    with changed (its first assignment ran before it knew the topic: empty) sets that metadata
    as assigned in its own ``_perform_assignment``, so ``need_rejoin()`` turns false before the
    join is finished: the SyncGroup answer is never applied, no partitions are assigned and,
    the heartbeat being off during a join, the coordinator expires the member after the
    session timeout without the member noticing. Java's ``rejoinNeededOrPending()`` (and
    kafka-python before 3.0) also counts a join in flight; so does this. The join is then
    sent again (kafka-python drops the finished one), which the coordinator answers as any
    rejoin."""
    from kafka.coordinator.consumer import ConsumerCoordinator

    need_rejoin = ConsumerCoordinator.need_rejoin
    if getattr(need_rejoin, "counts_pending_join", False):
        return

    def need_rejoin_or_pending(self: ConsumerCoordinator) -> bool:
        return need_rejoin(self) or getattr(self, "_join_task", None) is not None

    need_rejoin_or_pending.counts_pending_join = True  # type: ignore[attr-defined]
    ConsumerCoordinator.need_rejoin = need_rejoin_or_pending  # type: ignore[method-assign]


def kafka_python_group(cmd: str, a: argparse.Namespace) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    if cmd in ("describe-group", "committed"):
        print(f"kafka-python: {cmd} is done with confluent here", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    if cmd == "commit":
        commit_kafka_python(a, KafkaAdminClient, OffsetAndMetadata, TopicPartition)
        return
    if a.protocol == "consumer":
        print("kafka-python has no KIP-848 consumer protocol", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)

    m = Member(a)
    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    try:
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

        assignors["cooperative-sticky"] = CooperativeStickyAssignor
    except ImportError:
        pass
    kafka_python_pending_join_fix()
    c = KafkaConsumer(**consumer_settings(a, assignors, "kafka-python"))

    def tp(p: int) -> TopicPartition:
        return TopicPartition(a.topic, p)

    def commit_sync(offsets: dict[int, int], via: str) -> None:
        if not offsets:
            return
        try:
            c.commit({tp(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
            commit_event(via, offsets, None)
        except Exception as e:
            commit_event(via, offsets, error_name(e))

    def generation() -> tuple:
        md = c.group_metadata()
        return getattr(md, "generation_id", None), getattr(md, "member_id", None)

    class Listener(ConsumerRebalanceListener):
        # kafka-python runs these on its IO thread.
        def on_partitions_assigned(self, assigned) -> None:
            gen, member_id = generation()
            owned = [x.partition for x in c.assignment()]
            m.assigned(
                [x.partition for x in assigned],
                owned,
                lambda ps: c.pause(*map(tp, ps)),
                gen,
                member_id,
            )

        def on_partitions_revoked(self, revoked) -> None:
            # No commit here: kafka-python refuses a blocking commit on its IO thread.
            ps = [x.partition for x in revoked]
            if ps:
                m.revoked(ps, [x.partition for x in c.assignment() if x.partition not in ps])

        def on_partitions_lost(self, lost) -> None:
            ps = [x.partition for x in lost]
            m.revoked(ps, [x.partition for x in c.assignment() if x.partition not in ps], True)

    c.subscribe([a.topic], listener=Listener())

    def on_async_commit(offsets: dict, response: object) -> None:
        err = error_name(response) if isinstance(response, BaseException) else None
        commit_event("callback", {k.partition: v.offset for k, v in offsets.items()}, err)

    while not m.done():
        m.resume_if_asked(lambda ps: c.resume(*map(tp, ps)))
        batches = c.poll(timeout_ms=200, max_records=100)
        processed_any = False
        for part, msg in to_process(m, batches, lambda x: x in c.assignment(), c.seek):
            if m.stall_ms():
                time.sleep(m.stall_ms() / 1000)
            m.processed(part.partition, msg.offset, msg.key)
            processed_any = True
            if m.commit_due():
                commit_sync({part.partition: msg.offset + 1}, "offsets")
        if processed_any and a.commit == "sync":
            commit_sync(m.to_commit(), "sync")
        elif processed_any and a.commit == "async":
            offsets = m.to_commit()
            c.commit_async(
                {tp(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                callback=on_async_commit,
            )
    if a.commit in ("sync", "async"):
        commit_sync(m.to_commit(), "close")
    c.close(autocommit=a.commit == "auto")
    event("closed", records=m.records)


def commit_kafka_python(a, KafkaAdminClient, OffsetAndMetadata, TopicPartition) -> None:
    """commit: OffsetCommit from kafka-python's admin client. Without --member-id it is
    alter_group_offsets (generation -1, no member id); with it, kafka-python's own
    OffsetCommitRequest carries the given member id, generation and instance id."""
    from kafka.errors import for_code
    from kafka.protocol.consumer import OffsetCommitRequest

    admin = KafkaAdminClient(**python_settings(a, "kafka-python"))
    offsets = parse_pairs(a.offsets)
    try:
        if a.member_id is None and a.generation is None:
            res = admin.alter_group_offsets(
                a.group,
                {
                    TopicPartition(a.topic, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()
                },
            )
            errs = {str(k.partition): (None if v.errno == 0 else v.message) for k, v in res.items()}
        else:
            _Topic = OffsetCommitRequest.OffsetCommitRequestTopic
            _Partition = _Topic.OffsetCommitRequestPartition
            request = OffsetCommitRequest(
                max_version=8,
                group_id=a.group,
                generation_id_or_member_epoch=-1 if a.generation is None else a.generation,
                member_id=a.member_id or "",
                group_instance_id=a.instance_id,
                retention_time_ms=-1,
                topics=[
                    _Topic(
                        name=a.topic,
                        partitions=[
                            _Partition(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for p, o in offsets.items()
                        ],
                    )
                ],
            )

            async def send():
                node = await admin._find_coordinator_id(a.group)
                return await admin._manager.send(request, node_id=node)

            response = admin._manager.run(send)
            errs = {}
            for t in response.topics:
                for part in t.partitions:
                    err = for_code(part.error_code)
                    errs[str(part.partition_index)] = None if part.error_code == 0 else err.message
        top = next((e for e in errs.values() if e), None)
    except Exception as e:  # e.g. FindCoordinator's INVALID_GROUP_ID
        top, errs = error_name(e), {}
    finally:
        admin.close()
    emit({"error": top, "partitions": errs})


async def aiokafka_group(cmd: str, a: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.structs import OffsetAndMetadata

    if cmd in ("describe-group", "committed", "commit"):
        print(f"aiokafka: {cmd} is done with confluent/kafka-python here", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    if a.protocol == "consumer":
        print("aiokafka has no KIP-848 consumer protocol", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    m = Member(a)
    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    try:
        from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
            StickyPartitionAssignor,
        )

        assignors["sticky"] = StickyPartitionAssignor
    except ImportError:
        pass
    c = AIOKafkaConsumer(**consumer_settings(a, assignors, "aiokafka"))

    def tp(p: int) -> TopicPartition:
        return TopicPartition(a.topic, p)

    async def commit_sync(offsets: dict[int, int], via: str) -> None:
        if not offsets:
            return
        try:
            await c.commit({tp(p): OffsetAndMetadata(o, "") for p, o in offsets.items()})
            commit_event(via, offsets, None)
        except Exception as e:
            commit_event(via, offsets, error_name(e))

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, assigned) -> None:
            coord = c._coordinator
            owned = [x.partition for x in c.assignment()]
            m.assigned(
                [x.partition for x in assigned],
                owned,
                lambda ps: c.pause(*map(tp, ps)),
                getattr(coord, "generation", None),
                getattr(coord, "member_id", None),
            )

        async def on_partitions_revoked(self, revoked) -> None:
            ps = [x.partition for x in revoked]
            if not ps:
                return
            # No commit here: aiokafka's commit() inside the revocation fails (CommitFailedError)
            # and the member then never rejoins; sync mode has committed after each batch.
            m.revoked(ps, [])  # aiokafka is eager only: everything goes

    await c.start()
    c.subscribe([a.topic], listener=Listener())
    try:
        while not m.done():
            m.resume_if_asked(lambda ps: c.resume(*map(tp, ps)))
            batches = await c.getmany(timeout_ms=200, max_records=100)
            processed_any = False
            for part, msg in to_process(m, batches, lambda x: x in c.assignment(), c.seek):
                if m.stall_ms():
                    await asyncio.sleep(m.stall_ms() / 1000)
                m.processed(part.partition, msg.offset, msg.key)
                processed_any = True
                if m.commit_due():
                    await commit_sync({part.partition: msg.offset + 1}, "offsets")
            if processed_any and a.commit in ("sync", "async"):
                await commit_sync(m.to_commit(), "sync")
        if a.commit in ("sync", "async"):
            await commit_sync(m.to_commit(), "close")
    finally:
        await c.stop()  # leaves the group; commits consumed offsets when auto-committing
    event("closed", records=m.records)


# --------------------------------------------------------------------------- transactions
#
# txn-produce, txn-copy and txn-fence (README.md, "Transactions"). Each command is written once
# against two small adapters, a transactional producer and a group reader, with one
# implementation per client (confluent-kafka, kafka-python); aiokafka is not covered.

TXN_COMMANDS = ("txn-produce", "txn-copy", "txn-fence")


Polled = list[tuple[int, int, bytes | None, bytes | None]]  # (partition, offset, key, value)


class TxnProducer(ABC):
    """The transactional producer calls the commands make, in the client's terms."""

    @abstractmethod
    def __init__(self, a: argparse.Namespace, transactional_id: str) -> None: ...
    @abstractmethod
    def init(self) -> None: ...
    @abstractmethod
    def begin(self) -> None: ...
    @abstractmethod
    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list, ts: int | None
    ) -> None: ...
    @abstractmethod
    def flush(self) -> None:
        """Waits for every record sent and raises the first delivery error."""

    @abstractmethod
    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object) -> None:
        """sendOffsetsToTransaction of {partition: next offset}."""

    @abstractmethod
    def commit(self) -> None: ...
    @abstractmethod
    def abort(self) -> None: ...
    @abstractmethod
    def close(self) -> None: ...


class GroupReader(ABC):
    """The read_committed group consumer of txn-copy (subscribed to --topic, group --group)."""

    @abstractmethod
    def __init__(self, a: argparse.Namespace) -> None: ...
    @abstractmethod
    def poll(self, max_records: int, timeout: float) -> Polled:
        """The records of one poll, at most max_records."""

    @abstractmethod
    def seek(self, partition: int, offset: int) -> None: ...
    @abstractmethod
    def group_metadata(self) -> object: ...
    @abstractmethod
    def close(self) -> None: ...


class ConfluentTxnProducer(TxnProducer):
    def __init__(self, a: argparse.Namespace, transactional_id: str) -> None:
        from confluent_kafka import KafkaException, Producer, TopicPartition

        self.timeout = a.timeout
        self.topic_partition, self.exception = TopicPartition, KafkaException
        conf = {"bootstrap.servers": a.bootstrap} | confluent_security()
        self.p = Producer(conf | {"transactional.id": transactional_id})
        self.errors: list = []

    def _report(self, err: object, _msg: object) -> None:
        if err is not None:
            self.errors.append(err)

    def init(self) -> None:
        self.p.init_transactions(self.timeout)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list, ts: int | None
    ) -> None:
        # timestamp 0: librdkafka stamps the record itself.
        self.p.produce(
            topic, value, key, headers=headers, on_delivery=self._report, timestamp=ts or 0
        )
        self.p.poll(0)

    def flush(self) -> None:
        try:
            left = self.p.flush(self.timeout)
        except SystemError as e:
            # A fatal error (e.g. _FENCED) raised while delivery callbacks still run comes out
            # of confluent-kafka as a SystemError caused by the KafkaException: raise that.
            if isinstance(e.__cause__, self.exception):
                raise e.__cause__ from None
            raise
        if self.errors:
            err, self.errors = self.errors[0], []
            raise self.exception(err)
        if left:
            raise TimeoutError(f"{left} records not acknowledged in {self.timeout} s")

    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object) -> None:
        tps = [self.topic_partition(topic, p, o) for p, o in offsets.items()]
        self.p.send_offsets_to_transaction(tps, group_metadata, self.timeout)

    def commit(self) -> None:
        self.p.commit_transaction(self.timeout)

    def abort(self) -> None:
        self.p.abort_transaction(self.timeout)

    def close(self) -> None:
        self.p.flush(0)


class ConfluentGroupReader(GroupReader):
    def __init__(self, a: argparse.Namespace) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        self.topic, self.tp, self.exception = a.topic, TopicPartition, KafkaException
        conf = {"bootstrap.servers": a.bootstrap} | confluent_security()
        self.c = Consumer(
            conf
            | {
                "group.id": a.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.c.subscribe([a.topic])

    def poll(self, max_records: int, timeout: float) -> Polled:
        out: Polled = []
        for m in self.c.consume(max_records, timeout):
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise self.exception(err)
                print(f"python_driver: consume: {err}", file=sys.stderr)
                continue
            out.append((m.partition() or 0, m.offset() or 0, m.key(), m.value()))
        return out

    def seek(self, partition: int, offset: int) -> None:
        self.c.seek(self.tp(self.topic, partition, offset))

    def group_metadata(self) -> object:
        return self.c.consumer_group_metadata()

    def close(self) -> None:
        self.c.close()


class KafkaPythonTxnProducer(TxnProducer):
    def __init__(self, a: argparse.Namespace, transactional_id: str) -> None:
        from kafka import KafkaProducer, OffsetAndMetadata, TopicPartition

        self.timeout = a.timeout
        self.oam, self.tp = OffsetAndMetadata, TopicPartition
        self.p = KafkaProducer(
            **python_settings(a, "kafka-python"),
            transactional_id=transactional_id,
            enable_idempotence=True,
            acks="all",
        )
        self.futures: list = []

    def init(self) -> None:
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list, ts: int | None
    ) -> None:
        self.futures.append(self.p.send(topic, value, key, headers=headers, timestamp_ms=ts))

    def flush(self) -> None:
        self.p.flush(self.timeout)
        futures, self.futures = self.futures, []
        for f in futures:
            f.get(self.timeout)

    def send_offsets(self, topic: str, offsets: dict[int, int], group_metadata: object) -> None:
        self.p.send_offsets_to_transaction(
            {self.tp(topic, p): self.oam(o, "", -1) for p, o in offsets.items()}, group_metadata
        )

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()

    def close(self) -> None:
        self.p.close(timeout=5)


class KafkaPythonGroupReader(GroupReader):
    def __init__(self, a: argparse.Namespace) -> None:
        from kafka import KafkaConsumer, TopicPartition

        kafka_python_pending_join_fix()
        self.topic, self.tp = a.topic, TopicPartition
        self.c = KafkaConsumer(
            **python_settings(a, "kafka-python"),
            group_id=a.group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.c.subscribe([a.topic])

    def poll(self, max_records: int, timeout: float) -> Polled:
        batches = self.c.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        return [(m.partition, m.offset, m.key, m.value) for ms in batches.values() for m in ms]

    def seek(self, partition: int, offset: int) -> None:
        self.c.seek(self.tp(self.topic, partition), offset)

    def group_metadata(self) -> object:
        return self.c.group_metadata()

    def close(self) -> None:
        self.c.close(autocommit=False)


TXN_CLIENTS: dict[str, tuple[type[TxnProducer], type[GroupReader]]] = {
    "confluent": (ConfluentTxnProducer, ConfluentGroupReader),
    "kafka-python": (KafkaPythonTxnProducer, KafkaPythonGroupReader),
}


def txn_end(a: argparse.Namespace, k: int) -> str:
    """How transaction k ends: item k mod len of --end ("commit,abort": alternate)."""
    ends = a.end.split(",")
    return ends[k % len(ends)]


class Hold:
    """--hold true: a transaction waits for a line on stdin before it ends; stdin's end
    releases this and every later hold."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.on = a.hold == "true"

    def wait(self, txn: int) -> None:
        if self.on:
            event("hold", txn=txn)
            self.on = bool(sys.stdin.readline())


def txn_produce(a: argparse.Namespace, producer: type[TxnProducer], _: object) -> None:
    p = producer(a, a.transactional_id)
    hold = Hold(a)
    try:
        p.init()
        for k in range(a.batches):
            ids = range(k * a.count // a.batches, (k + 1) * a.count // a.batches)
            p.begin()
            for i in ids:
                r = record(i, a.start_ts)
                p.send(a.topic, r.key, r.value, r.headers, r.timestamp)
            p.flush()
            hold.wait(k)
            end = txn_end(a, k)
            p.commit() if end == "commit" else p.abort()
            event(end, txn=k, first=ids.start, count=len(ids))
    finally:
        p.close()


def txn_copy(a: argparse.Namespace, producer: type[TxnProducer], reader: type[GroupReader]) -> None:
    p = producer(a, a.transactional_id)
    r = reader(a)
    hold = Hold(a)
    committed = aborted = txn = 0
    last = time.monotonic()
    deadline = last + a.timeout
    timed_out = False
    try:
        p.init()
        while not (a.count and committed >= a.count) and not (
            a.max_batches and txn >= a.max_batches
        ):
            now = time.monotonic()
            if a.idle and now - last >= a.idle:
                break
            if now >= deadline:
                timed_out = True
                break
            recs = r.poll(a.batch, min(0.5, deadline - now))
            if not recs:
                continue
            last = time.monotonic()
            first: dict[int, int] = {}
            nxt: dict[int, int] = {}
            p.begin()
            for part, off, key, value in recs:
                first.setdefault(part, off)
                nxt[part] = off + 1
                p.send(a.output, key, value, [("src", f"{part}:{off}".encode())], None)
            p.flush()
            p.send_offsets(a.topic, nxt, r.group_metadata())
            hold.wait(txn)
            end = txn_end(a, txn)
            if end == "commit":
                p.commit()
                committed += len(recs)
            else:
                p.abort()
                aborted += len(recs)
                for part, off in first.items():  # read them again in a later transaction
                    r.seek(part, off)
            offsets = {str(k): v for k, v in sorted(nxt.items())}
            event(end, txn=txn, records=len(recs), offsets=offsets, keys=[s(x[2]) for x in recs])
            txn += 1
    finally:
        r.close()
        p.close()
    event("closed", committed=committed, aborted=aborted)
    if timed_out:
        fail(f"txn-copy: {committed} of {a.count} records committed in {a.timeout} s", "TIMEOUT")


def txn_fence(a: argparse.Namespace, producer: type[TxnProducer], _: object) -> None:
    def send(p: TxnProducer, i: int) -> None:
        r = record(i, a.start_ts)
        p.send(a.topic, r.key, r.value, r.headers, r.timestamp)
        p.flush()

    zombie = producer(a, a.transactional_id)
    zombie.init()
    zombie.begin()
    event("begin", producer="A")
    send(zombie, 0)
    event("sent", producer="A", key="key-0")
    b = producer(a, a.transactional_id)
    b.init()  # bumps the epoch: A is fenced and its open transaction aborted
    event("init", producer="B")
    b.begin()
    send(b, 1)
    b.commit()
    event("commit", producer="B", key="key-1")
    b.close()
    stage = "send"
    try:
        send(zombie, 2)
        stage = "commit"
        zombie.commit()
    except Exception as e:
        event("fenced", producer="A", stage=stage, error=error_name(e))
        return
    finally:
        zombie.close()
    event("not-fenced", producer="A")
    fail("txn-fence: the first producer committed after the second one initialized", "NOT_FENCED")


TXN_RUNNERS: dict[
    str, Callable[[argparse.Namespace, type[TxnProducer], type[GroupReader]], None]
] = {
    "txn-produce": txn_produce,
    "txn-copy": txn_copy,
    "txn-fence": txn_fence,
}


GROUP_CLIENTS: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "confluent": confluent_group,
    "kafka-python": kafka_python_group,
    "aiokafka": lambda cmd, a: asyncio.run(aiokafka_group(cmd, a)),
}


CLIENTS: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "confluent": confluent,
    "kafka-python": kafka_python,
    "aiokafka": lambda cmd, a: asyncio.run(aiokafka_main(cmd, a)),
}


def client_logging() -> None:
    """$RAFKA_CLIENT_LOG (README.md, "Logging"; default WARN): the Python clients' own log on
    stderr, with times and threads, to line it up with the brokers' logs."""
    level = os.environ.get("RAFKA_CLIENT_LOG", "WARN").upper()
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.getLevelName("WARNING" if level == "WARN" else level),
        format="%(asctime)s %(threadName)s %(levelname)s %(name)s: %(message)s",
    )


def main() -> None:
    client_logging()
    if sys.argv[2:3] == ["admin"]:  # admin actions have their own options (python_admin.py)
        import python_admin

        COMMAND[0] = "admin"
        python_admin.run(sys.argv[1], sys.argv[3:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("client", choices=CLIENTS)
    ap.add_argument(
        "command",
        choices=[
            "create-topic",
            "produce",
            "consume",
            "offsets-for-times",
            *GROUP_COMMANDS,
            *TXN_COMMANDS,
        ],
    )
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default=None)
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
    ap.add_argument("--timeout", type=float, default=None)  # 30 s; transactions: 60 s
    ap.add_argument(
        "--isolation-level", default=None, choices=["read_committed", "read_uncommitted"]
    )
    # transactions (README.md, "Transactions")
    ap.add_argument("--transactional-id", default=None)
    ap.add_argument("--batches", type=int, default=1)
    ap.add_argument("--end", default="commit")
    ap.add_argument("--hold", default="false", choices=["true", "false"])
    ap.add_argument("--output", default=None)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--max-batches", type=int, default=0)
    ap.add_argument("--idle", type=float, default=0)
    # consumer groups (README.md, "Consumer groups")
    ap.add_argument("--group", default=None)
    ap.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--assignor", default=None)
    ap.add_argument("--session-timeout", type=float, default=0)
    ap.add_argument("--heartbeat-interval", type=float, default=0)
    ap.add_argument("--max-poll-interval", type=float, default=0)
    ap.add_argument(
        "--commit", default="auto", choices=["auto", "sync", "async", "offsets", "none"]
    )
    ap.add_argument("--auto-commit-interval", type=float, default=0)
    ap.add_argument("--commit-every", type=int, default=1)
    ap.add_argument("--process-ms", type=float, default=0)
    ap.add_argument("--stall-at", type=int, default=0)
    ap.add_argument("--stall-ms", type=float, default=0)
    ap.add_argument("--max-records", type=int, default=0)
    ap.add_argument("--duration", type=float, default=0)
    ap.add_argument("--seek", default=None)
    ap.add_argument("--pause", default=None)
    ap.add_argument("--offset-reset", default="earliest", choices=["earliest", "latest"])
    ap.add_argument("--stop-on-eof", default="false", choices=["true", "false"])
    ap.add_argument("--offsets", default=None)
    ap.add_argument("--member-id", default=None)
    ap.add_argument("--generation", type=int, default=None)
    a = ap.parse_args()
    COMMAND[0] = a.command
    if a.start_ts is None:
        a.start_ts = int(time.time() * 1000)
    if a.timeout is None:
        a.timeout = 60 if a.command in TXN_COMMANDS else 30
    if not set(a.end.split(",")) <= {"commit", "abort"} or a.batches < 1 or a.batch < 1:
        ap.print_usage(sys.stderr)
        print("python_driver: --end takes commit|abort[,...]", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    needs = {
        "txn-produce": ("topic", "transactional_id"),
        "txn-copy": ("topic", "output", "group", "transactional_id"),
        "txn-fence": ("topic", "transactional_id"),
        "group-consume": ("topic", "group"),
        "describe-group": ("group",),
        "committed": ("topic", "group"),
        "commit": ("topic", "group", "offsets"),
    }
    missing = [
        n.replace("_", "-") for n in needs.get(a.command, ("topic",)) if getattr(a, n) is None
    ]
    if missing:
        ap.print_usage(sys.stderr)
        print(f"python_driver: {a.command} needs --{' --'.join(missing)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    if a.command == "group-consume":
        try:
            GROUP_CLIENTS[a.client](a.command, a)
        except Exception as e:  # e.g. JoinGroup's INVALID_GROUP_ID: report it as an event
            event("error", error=error_name(e), message=str(e), fatal=True)
            fail(f"group-consume: {e!r}")
    elif a.command in GROUP_COMMANDS:
        GROUP_CLIENTS[a.client](a.command, a)
    elif a.command in TXN_COMMANDS:
        if a.client not in TXN_CLIENTS:
            unsupported(f"{a.command}: the driver has no {a.client} transactions")
        try:
            TXN_RUNNERS[a.command](a, *TXN_CLIENTS[a.client])
        except Exception as e:  # e.g. PRODUCER_FENCED: the contract's error line
            fail(f"{a.command}: {e!r}", error_name(e))
    else:
        try:
            CLIENTS[a.client](a.command, a)
        except Exception as e:  # e.g. TOPIC_AUTHORIZATION_FAILED: the contract's error line
            fail(f"{a.command}: {e!r}", error_name(e))


if __name__ == "__main__":
    main()
