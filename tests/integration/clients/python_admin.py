"""`python_driver.py <confluent|kafka-python> admin <action> ...`: one admin call of the named
client per run, its outcome as the client-neutral JSON of README.md ("Admin"), so one test
checks every client. Per-resource broker errors are printed by Kafka's name with exit 0; a
failure of the whole call ends with the contract's error line and exit 1; an action the client
does not have exits 3.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

import python_driver
from drivers import EXIT_UNSUPPORTED
from python_driver import (
    confluent_security,
    emit,
    fail,
    parse_pairs,
    python_settings,
    unsupported,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import ConfigResource

T = TypeVar("T")

# DescribeConfigs' wire source numbers by Kafka's (Java's ConfigEntry.ConfigSource) names.
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
ACTIONS = (
    "describe-cluster",
    "describe-topics",
    "list-offsets",
    "create-partitions",
    "delete-records",
    "describe-configs",
    "alter-configs",
    "elect-leaders",
    "reassign",
    "list-reassignments",
    "describe-log-dirs",
    "alter-log-dir",
    "describe-features",
    "update-features",
)


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python_driver.py CLIENT admin")
    ap.add_argument("action", choices=ACTIONS)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--topic")
    ap.add_argument("--broker")
    ap.add_argument("--broker-logger")
    ap.add_argument("--group")  # a GROUP config resource (share.* / consumer.* group configs)
    ap.add_argument("--brokers")
    ap.add_argument("--count", type=int)
    ap.add_argument("--assignments")
    ap.add_argument("--validate-only", default="false", choices=["true", "false"])
    ap.add_argument("--offsets")
    ap.add_argument("--partition", type=int)
    ap.add_argument("--partitions")
    ap.add_argument("--page-size", type=int)
    for many in ("set", "delete", "append", "subtract"):
        ap.add_argument(f"--{many}", action="append", default=[])
    ap.add_argument("--legacy", default="false", choices=["true", "false"])
    ap.add_argument("--election", default="preferred", choices=["preferred", "unclean"])
    ap.add_argument("--replicas")
    ap.add_argument("--cancel", default="false", choices=["true", "false"])
    ap.add_argument("--dir")
    ap.add_argument("--feature")
    ap.add_argument(
        "--upgrade-type",
        default="upgrade",
        choices=["upgrade", "safe-downgrade", "unsafe-downgrade"],
    )
    return ap.parse_args(argv)


# librdkafka's and kafka-python's names of broker errors where they differ from Kafka's
# (rd_kafka_err2name; kafka.errors' `message`).
CLIENT_NAMES = {
    "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT",
}


def error_name(e: BaseException) -> str | None:
    """python_driver.error_name, with Kafka's names for the clients' few own ones."""
    name = python_driver.error_name(e)
    return CLIENT_NAMES.get(name, name) if name else name


def ints(spec: str | None) -> list[int]:
    return [int(x) for x in (spec or "").split(",") if x.strip()]


def assignments(spec: str | None) -> list[list[int]] | None:
    """ "1,2;2,3": the replicas of each new partition."""
    return None if spec is None else [ints(part) for part in spec.split(";")]


def key_value(spec: str) -> tuple[str, str]:
    key, eq, value = spec.partition("=")
    if not eq:
        fail(f"expected k=v, got {spec!r}")
    return key, value


def resource(a: argparse.Namespace) -> tuple[str, str]:
    """(kind, name): --topic T | --broker ID ("" = the cluster-wide default) | --broker-logger
    | --group G."""
    for kind in ("topic", "broker", "broker_logger", "group"):
        if getattr(a, kind) is not None:
            return kind.replace("_", "-"), getattr(a, kind)
    fail("needs --topic, --broker, --broker-logger or --group")
    raise AssertionError


def source_number(source: object) -> int:
    """confluent-kafka gives a ConfigSource, but a bare int for synonyms."""
    return int(getattr(source, "value", source))  # type: ignore[call-overload]


def sort_partitions(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def config_json(
    value: str | None,
    source: int | str,
    read_only: bool,
    sensitive: bool,
    synonyms: list | None,
    type_: str | None = None,
    documentation: str | None = None,
) -> dict:
    return {
        "value": value,
        "source": source if isinstance(source, str) else SOURCES.get(source, str(source)),
        "read_only": read_only,
        "sensitive": sensitive,
        "synonyms": synonyms,
        "type": type_,
        "documentation": documentation,
    }


# --------------------------------------------------------------------------- confluent


class ConfluentAdmin:
    """confluent-kafka's AdminClient (librdkafka): no reassignments, log dirs or features."""

    def __init__(self, a: argparse.Namespace) -> None:
        from confluent_kafka.admin import AdminClient

        self.a = a
        self.admin = AdminClient({"bootstrap.servers": a.bootstrap} | confluent_security())
        self.timeout = a.timeout

    def result(self, future: Future[T]) -> T:
        return future.result(self.timeout)

    def outcome(self, future: Future[Any]) -> str | None:
        try:
            self.result(future)
        except Exception as e:
            print(f"python_admin: {e!r}", file=sys.stderr)
            return error_name(e)
        return None

    def describe_cluster(self) -> None:
        r = self.result(self.admin.describe_cluster(request_timeout=self.timeout))
        emit(
            {
                "cluster_id": r.cluster_id,
                "controller": r.controller.id if r.controller is not None else None,
                "brokers": [
                    {"id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
                    for n in sorted(r.nodes, key=lambda n: n.id)
                ],
            }
        )

    def describe_topics(self) -> None:
        from confluent_kafka import TopicCollection

        names = self.a.topic.split(",")
        futures = self.admin.describe_topics(TopicCollection(names))
        for name in names:
            try:
                d = self.result(futures[name])
            except Exception as e:
                emit({"topic": name, "error": error_name(e)})
                continue
            parts = [
                {
                    "partition": p.id,
                    "leader": p.leader.id if p.leader is not None else None,
                    "replicas": [n.id for n in p.replicas],
                    "isr": [n.id for n in p.isr],
                }
                for p in d.partitions
            ]
            emit(
                {
                    "topic": name,
                    "error": None,
                    "topic_id": topic_id(d.topic_id),
                    "internal": d.is_internal,
                    "partitions": parts,
                }
            )

    def list_offsets(self) -> None:
        from confluent_kafka import TopicCollection, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        d = self.result(self.admin.describe_topics(TopicCollection([self.a.topic]))[self.a.topic])
        tps = [TopicPartition(self.a.topic, p.id) for p in d.partitions]
        out: dict[str, dict] = {str(tp.partition): {} for tp in tps}
        for spec, name in ((OffsetSpec.earliest(), "earliest"), (OffsetSpec.latest(), "latest")):
            for tp, f in self.admin.list_offsets({tp: spec for tp in tps}).items():
                out[str(tp.partition)][name] = self.result(f).offset
        emit({"topic": self.a.topic, "partitions": out})

    def create_partitions(self) -> None:
        from confluent_kafka.admin import NewPartitions

        given = assignments(self.a.assignments)
        new = NewPartitions(self.a.topic, self.a.count, *([given] if given else []))
        futures = self.admin.create_partitions(
            [new], validate_only=self.a.validate_only == "true", request_timeout=self.timeout
        )
        emit({"topic": self.a.topic, "error": self.outcome(futures[self.a.topic])})

    def delete_records(self) -> None:
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(self.a.topic, p, o) for p, o in parse_pairs(self.a.offsets).items()]
        rows = []
        for tp, f in self.admin.delete_records(tps, request_timeout=self.timeout).items():
            try:
                low, err = self.result(f).low_watermark, None
            except Exception as e:
                print(f"python_admin: {e!r}", file=sys.stderr)
                low, err = None, error_name(e)
            rows.append(
                {"topic": tp.topic, "partition": tp.partition, "error": err, "low_watermark": low}
            )
        for row in sort_partitions(rows):
            emit(row)

    def config_resource(self, **kwargs: Any) -> ConfigResource:
        from confluent_kafka.admin import ConfigResource, ResourceType

        kind, name = resource(self.a)
        if kind == "broker-logger":
            unsupported("confluent-kafka has no BROKER_LOGGER config resource")
        if name == "":
            unsupported("confluent-kafka refuses the empty name of the cluster-wide broker default")
        restype = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP}.get(
            kind, ResourceType.BROKER
        )
        return ConfigResource(restype, name, **kwargs)

    def describe_configs(self) -> None:
        res = self.config_resource()
        kind, name = resource(self.a)
        try:
            entries = self.result(self.admin.describe_configs([res])[res])
        except Exception as e:
            emit({"resource": kind, "name": name, "error": error_name(e)})
            return
        configs = {
            e.name: config_json(
                e.value,
                source_number(e.source),
                e.is_read_only,
                e.is_sensitive,
                [[s.name, s.value, SOURCES[source_number(s.source)]] for s in e.synonyms.values()],
            )
            for e in entries.values()
        }
        emit(
            {
                "resource": kind,
                "name": name,
                "error": None,
                "configs": dict(sorted(configs.items())),
            }
        )

    def alter_configs(self) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

        a = self.a
        kind, name = resource(a)
        validate = a.validate_only == "true"
        if a.legacy == "true":  # AlterConfigs: the --set entries replace every dynamic config
            if a.delete or a.append or a.subtract:
                fail("alter-configs --legacy true takes --set only")
            res = self.config_resource(set_config=dict(key_value(kv) for kv in a.set))
            future = self.admin.alter_configs([res], validate_only=validate)[res]
        else:
            ops = [
                ConfigEntry(k, v, incremental_operation=op)
                for specs, op in (
                    (a.set, AlterConfigOpType.SET),
                    (a.append, AlterConfigOpType.APPEND),
                    (a.subtract, AlterConfigOpType.SUBTRACT),
                )
                for k, v in map(key_value, specs)
            ] + [
                ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in a.delete
            ]
            res = self.config_resource(incremental_configs=ops)
            future = self.admin.incremental_alter_configs([res], validate_only=validate)[res]
        emit({"resource": kind, "name": name, "error": self.outcome(future)})

    def elect_leaders(self) -> None:
        from confluent_kafka import ElectionType, TopicPartition

        kind = ElectionType.PREFERRED if self.a.election == "preferred" else ElectionType.UNCLEAN
        tps = (
            None
            if self.a.topic is None
            else [TopicPartition(self.a.topic, p) for p in ints(self.a.partitions)]
        )
        try:
            # No keyword arguments: confluent-kafka 2.16.1's binding then raises SystemError
            # ("more argument specifiers than keyword list entries").
            res = self.result(self.admin.elect_leaders(kind, tps))
        except Exception as e:
            emit({"error": error_name(e), "partitions": []})
            return
        rows = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "error": None if err is None else error_name(Exception(err)),
            }
            for tp, err in res.items()
        ]
        emit({"error": None, "partitions": sort_partitions(rows)})


# --------------------------------------------------------------------------- kafka-python


def kp_error(err: object) -> str | None:
    """kafka-python's error class/instance/code as Kafka's name; None for no error."""
    from kafka.errors import NoError, for_code

    if isinstance(err, int):
        err = for_code(err)
    if err is None or err is NoError or isinstance(err, NoError):
        return None
    cls = err if isinstance(err, type) else type(err)
    name = getattr(cls, "message", cls.__name__)
    return CLIENT_NAMES.get(name, name)


class KafkaPythonAdmin:
    """kafka-python's KafkaAdminClient (3.x has every call of this contract)."""

    def __init__(self, a: argparse.Namespace) -> None:
        from kafka import KafkaAdminClient

        self.a = a
        self.admin = KafkaAdminClient(
            request_timeout_ms=int(a.timeout * 1000), **python_settings(a, "kafka-python")
        )

    def describe_cluster(self) -> None:
        r = self.admin.describe_cluster()
        brokers = sorted(r["brokers"], key=lambda b: b["broker_id"])
        controller = r.get("controller_id")
        emit(
            {
                "cluster_id": r["cluster_id"],
                "controller": None if controller in (None, -1) else controller,
                "brokers": [
                    {"id": b["broker_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                    for b in brokers
                ],
            }
        )

    def describe_topics(self) -> None:
        """DescribeTopicPartitions (75), following the cursor page by page (--page-size)."""
        names = self.a.topic.split(",")
        topics: dict[str, dict] = {}
        cursor = None
        while True:
            res = self.admin.describe_topic_partitions(
                names, response_partition_limit=self.a.page_size or 2000, cursor=cursor
            )
            for t in res["topics"]:
                seen = topics.setdefault(t["name"], t | {"partitions": []})
                seen["partitions"].extend(t["partitions"])
            cursor = res["next_cursor"]
            if cursor is None:
                break
        for name in names:
            t = topics.get(name)
            err = "UNKNOWN_TOPIC_OR_PARTITION" if t is None else kp_error(t["error_code"])
            if t is None or err is not None:
                emit({"topic": name, "error": err})
                continue
            parts = [
                {
                    "partition": p["partition_index"],
                    "leader": None if p["leader_id"] < 0 else p["leader_id"],
                    "replicas": p["replica_nodes"],
                    "isr": p["isr_nodes"],
                }
                for p in sorted(t["partitions"], key=lambda p: p["partition_index"])
            ]
            emit(
                {
                    "topic": name,
                    "error": None,
                    "topic_id": topic_id(t["topic_id"]),
                    "internal": t["is_internal"],
                    "partitions": parts,
                }
            )

    def create_partitions(self) -> None:
        spec: object = self.a.count
        if self.a.assignments is not None:
            spec = {"count": self.a.count, "assignments": assignments(self.a.assignments)}
        try:
            self.admin.create_partitions(
                {self.a.topic: spec}, validate_only=self.a.validate_only == "true"
            )
            err = None
        except Exception as e:
            print(f"python_admin: {e!r}", file=sys.stderr)
            err = error_name(e)
        emit({"topic": self.a.topic, "error": err})

    def delete_records(self) -> None:
        from kafka import TopicPartition

        req = {TopicPartition(self.a.topic, p): o for p, o in parse_pairs(self.a.offsets).items()}
        try:
            res = self.admin.delete_records(req)
        except Exception as e:
            print(f"python_admin: {e!r}", file=sys.stderr)
            for tp in req:
                emit(
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "error": error_name(e),
                        "low_watermark": None,
                    }
                )
            return
        for tp in sorted(req):
            r = res[tp]
            err = kp_error(r.get("error_code", 0))
            emit(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "error": err,
                    "low_watermark": None if err else r["low_watermark"],
                }
            )

    def config_resource(self, configs: dict | None = None) -> tuple:
        """(ConfigResource, ConfigResourceType) of --topic/--broker/--broker-logger."""
        from kafka.admin import ConfigResource, ConfigResourceType

        kind, name = resource(self.a)
        if name == "":
            unsupported("kafka-python refuses the empty name of the cluster-wide broker default")
        restype = ConfigResourceType[kind.replace("-", "_").upper()]
        return ConfigResource(restype, name, configs=configs), restype

    def describe_configs(self) -> None:
        """kafka-python drops the resource's error code (a refused resource shows no configs)
        and names sources and types itself (Kafka's names)."""
        kind, name = resource(self.a)
        res_obj, restype = self.config_resource()
        res = self.admin.describe_configs([res_obj], include_synonyms=True, config_filter="all")
        configs = res.get(restype.name.lower(), {}).get(name)
        if configs is None:
            emit({"resource": kind, "name": name, "error": "UNKNOWN_SERVER_ERROR"})
            return
        out = {
            key: config_json(
                c.get("value"),
                c.get("config_source", 0),
                c.get("read_only", False),
                c.get("is_sensitive", False),
                [[x["name"], x["value"], x["source"]] for x in c.get("synonyms") or []],
                c.get("config_type"),
                c.get("documentation"),
            )
            for key, c in configs.items()
        }
        emit({"resource": kind, "name": name, "error": None, "configs": dict(sorted(out.items()))})

    def alter_configs(self) -> None:
        a = self.a
        kind, name = resource(a)
        if a.legacy == "true":
            # Its AlterConfigs adds the resource's other dynamic configs to the request (so
            # nothing reverts to its default), which is not AlterConfigs' meaning.
            unsupported("kafka-python's legacy alter_configs merges the current configs")
        ops: dict[str, object] = {
            k: (op, v)
            for specs, op in ((a.set, "SET"), (a.append, "APPEND"), (a.subtract, "SUBTRACT"))
            for k, v in map(key_value, specs)
        } | {k: ("DELETE", None) for k in a.delete}
        res_obj, restype = self.config_resource(ops)
        res = self.admin.alter_configs(
            [res_obj],
            validate_only=a.validate_only == "true",
            raise_on_unknown=False,
            incremental=True,
        )
        # 'OK', or the error as text: "[Error 40] InvalidConfigurationError: <message>".
        result = res[restype.name.lower()][name]
        code = re.match(r"\[Error (-?\d+)\]", result)
        if result != "OK" and code is None:
            fail(f"alter-configs: unexpected result {result!r}")
        emit({"resource": kind, "name": name, "error": kp_error(int(code[1])) if code else None})

    def elect_leaders(self) -> None:
        kind = 0 if self.a.election == "preferred" else 1
        tps = None if self.a.topic is None else {self.a.topic: ints(self.a.partitions)}
        r = self.admin.elect_leaders(kind, tps, raise_errors=False)
        rows = [
            {"topic": t.topic, "partition": p.partition_id, "error": kp_error(p.error_code)}
            for t in r.replica_election_results
            for p in t.partition_result
        ]
        emit({"error": kp_error(r.error_code), "partitions": sort_partitions(rows)})

    def reassign(self) -> None:
        from kafka import TopicPartition

        tp = TopicPartition(self.a.topic, self.a.partition)
        target = None if self.a.cancel == "true" else ints(self.a.replicas)
        res = self.admin.alter_partition_reassignments({tp: target})
        emit({"topic": tp.topic, "partition": tp.partition, "error": kp_error(res.get(tp))})

    def list_reassignments(self) -> None:
        which = None if self.a.topic is None else {self.a.topic: ints(self.a.partitions)}
        res = self.admin.list_partition_reassignments(which)
        rows = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": r["replicas"],
                "adding": r["adding_replicas"],
                "removing": r["removing_replicas"],
            }
            for tp, r in res.items()
        ]
        emit({"error": None, "reassignments": sort_partitions(rows)})

    def describe_features(self) -> None:
        """kafka-python 3.0.12 answers {name: {supported, finalized, finalized_epoch}}."""
        res = self.admin.describe_features()
        finalized, supported, epoch = {}, {}, None
        for name, f in sorted(res.items()):
            supported[name] = dict(zip(("min", "max"), f["supported"], strict=True))
            if f.get("finalized") is not None:
                finalized[name] = dict(zip(("min", "max"), f["finalized"], strict=True))
            epoch = f.get("finalized_epoch", epoch)
        emit({"error": None, "epoch": epoch, "finalized": finalized, "supported": supported})


def topic_id(value: object) -> str | None:
    """A topic id as Kafka prints it (Uuid.toString: URL-safe base64 without padding)."""
    import base64
    import uuid

    if isinstance(value, uuid.UUID):  # kafka-python
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    # librdkafka prints standard base64
    return None if value is None else str(value).replace("+", "-").replace("/", "_").rstrip("=")


def run(client: str, argv: list[str]) -> None:
    """Entry point from python_driver.py: ``client`` is confluent or kafka-python."""
    a = parse(argv)
    clients: dict[str, Callable[[argparse.Namespace], object]] = {
        "confluent": ConfluentAdmin,
        "kafka-python": KafkaPythonAdmin,
    }
    if client not in clients:
        unsupported(f"admin: the driver has no {client} admin client")
    admin = clients[client](a)
    method = getattr(admin, a.action.replace("-", "_"), None)
    if method is None:
        print(f"python_driver: {client} has no admin {a.action}", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    try:
        method()
    except Exception as e:  # a failure of the whole call: the contract's error line
        fail(f"admin {a.action}: {e!r}", error_name(e))
