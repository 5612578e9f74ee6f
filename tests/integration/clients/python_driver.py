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
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drivers import EXIT_FAILED, EXIT_TOPIC_EXISTS, EXIT_UNSUPPORTED, EXIT_USAGE, record

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

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


def located(msg: Message) -> tuple[int, int]:
    """A confluent-kafka record's (partition, offset): its stub makes both optional, as an
    error event has neither; every record has both."""
    p, o = msg.partition(), msg.offset()
    assert p is not None, f"a record without a partition: {msg.error()}"
    assert o is not None, f"a record without an offset: {msg.error()}"
    return p, o


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

        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err)
            else:
                partition, offset = located(msg)
                emit(
                    {
                        "key": s(msg.key()),  # record() keys are ASCII
                        "partition": partition,
                        "offset": offset,
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
                partition, offset = located(m)
                consumed(
                    partition,
                    offset,
                    m.key(),
                    m.value(),
                    list(m.headers() or []),
                    ts,
                    names[ts_type],
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
    if err is not None and hasattr(err, "name") and callable(err.name):  # a KafkaError
        return confluent_error_name(err)
    if hasattr(e, "name") and callable(e.name):
        return e.name()
    msg = getattr(type(e), "message", None)  # kafka-python / aiokafka broker errors
    if isinstance(msg, str) and msg.isupper():
        return msg
    return type(e).__name__


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
    # A test that gives up on a hung driver sends SIGQUIT first: the stacks show where it hung.
    faulthandler.register(signal.SIGQUIT, all_threads=True)
    import python_groups  # the consumer-group commands (python_groups.py)
    import python_share  # the share-group commands (python_share.py)
    import python_txn  # the transactions commands (python_txn.py)

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
            *python_txn.TXN_COMMANDS,
            *python_share.SHARE_COMMANDS,
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
    # share groups (README.md, "Share groups")
    ap.add_argument("--ack", default="accept", choices=python_share.ACKS)
    ap.add_argument("--release", default=None)
    ap.add_argument("--reject", default=None)
    a = ap.parse_args()
    COMMAND[0] = a.command
    if a.start_ts is None:
        a.start_ts = int(time.time() * 1000)
    if a.timeout is None:
        a.timeout = 60 if a.command in python_txn.TXN_COMMANDS else 30
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
        "share-consume": ("topic", "group"),
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
            python_groups.GROUP_CLIENTS[a.client](a.command, a)
        except Exception as e:  # e.g. JoinGroup's INVALID_GROUP_ID: report it as an event
            event("error", error=error_name(e), message=str(e), fatal=True)
            fail(f"group-consume: {e!r}")
    elif a.command in GROUP_COMMANDS:
        python_groups.GROUP_CLIENTS[a.client](a.command, a)
    elif a.command in python_share.SHARE_COMMANDS:
        if a.client not in python_share.SHARE_CLIENTS:
            unsupported(f"{a.command}: {a.client} has no share consumer")
        python_share.SHARE_CLIENTS[a.client](a)
    elif a.command in python_txn.TXN_COMMANDS:
        if a.client not in python_txn.TXN_CLIENTS:
            unsupported(f"{a.command}: the driver has no {a.client} transactions")
        try:
            python_txn.TXN_RUNNERS[a.command](a, *python_txn.TXN_CLIENTS[a.client])
        except Exception as e:  # e.g. PRODUCER_FENCED: the contract's error line
            fail(f"{a.command}: {e!r}", error_name(e))
    else:
        try:
            CLIENTS[a.client](a.command, a)
        except Exception as e:  # e.g. TOPIC_AUTHORIZATION_FAILED: the contract's error line
            fail(f"{a.command}: {e!r}", error_name(e))


if __name__ == "__main__":
    # python_groups, python_txn and python_admin import this very module, not a second copy
    sys.modules["python_driver"] = sys.modules["__main__"]
    main()
