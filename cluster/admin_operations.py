"""Cluster operations over the Kafka protocol, as the `rafka` commands and Kafka's tools run them:
reassignments and leader elections, partitions and records, log directories, feature levels
and dynamic configs (kafka-reassign-partitions.sh, kafka-leader-election.sh,
kafka-delete-records.sh, kafka-log-dirs.sh, kafka-features.sh, kafka-configs.sh)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.admin import TIMEOUT_MS, AdminError, Brokers, check, metadata, refusal
from cluster.kafka_client import KafkaConnection, builder

# ---------------------------------------------------------------- reassignments and elections

ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
ELECTION_TYPES = {"preferred": 0, "unclean": 1}  # Kafka's ElectionType values


@dataclass
class Reassignment:
    """One partition being moved, as ListPartitionReassignments reports it."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


def _partition_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, index in partitions:
        out.setdefault(topic, []).append(index)
    return out


def reassign_partitions(
    brokers: Brokers, changes: list[tuple[str, int, list[int] | None]]
) -> dict[str, AdminError | None]:
    """AlterPartitionReassignments (kafka-reassign-partitions.sh --execute / --cancel): each
    partition's error by "topic-partition", None when accepted; None replicas cancels."""
    b = builder(ALTER_REASSIGNMENTS, 0)
    by_topic: dict[str, list[Any]] = {}
    for topic, index, replicas in changes:
        by_topic.setdefault(topic, []).append(
            b.ReassignablePartition(
                partition_index=index, replicas=None if replicas is None else tuple(replicas)
            )
        )
    with brokers.any() as c:
        r = c.call(
            ALTER_REASSIGNMENTS,
            0,
            timeout=TIMEOUT_MS,
            topics=tuple(
                b.ReassignableTopic(name=topic, partitions=tuple(parts))
                for topic, parts in by_topic.items()
            ),
        )
    check("reassign partitions", r.error_code, r.error_message)
    return {
        _partition_key(t.name, p.partition_index): refusal(
            f"reassign {t.name}-{p.partition_index}", p.error_code, p.error_message
        )
        for t in r.responses
        for p in t.partitions
    }


def list_reassignments(
    brokers: Brokers, partitions: list[tuple[str, int]] | None = None
) -> list[Reassignment]:
    """ListPartitionReassignments (kafka-reassign-partitions.sh --list): the partitions being
    moved among `partitions` (None: all)."""
    b = builder(LIST_REASSIGNMENTS, 0)
    topics = (
        None
        if partitions is None
        else tuple(
            b.ListPartitionReassignmentsTopics(name=topic, partition_indexes=tuple(indexes))
            for topic, indexes in _by_topic(partitions).items()
        )
    )
    with brokers.any() as c:
        r = c.call(LIST_REASSIGNMENTS, 0, timeout=TIMEOUT_MS, topics=topics)
    check("list reassignments", r.error_code, r.error_message)
    return sorted(
        (
            Reassignment(
                t.name,
                p.partition_index,
                list(p.replicas),
                list(p.adding_replicas),
                list(p.removing_replicas),
            )
            for t in r.topics
            for p in t.partitions
        ),
        key=lambda x: (x.topic, x.partition),
    )


def elect_leaders(
    brokers: Brokers, election: str, partitions: list[tuple[str, int]] | None = None
) -> dict[str, AdminError | None]:
    """ElectLeaders (kafka-leader-election.sh): each partition's outcome by "topic-partition",
    None when a leader was elected. `partitions` None: every partition (then only those that
    needed an election are reported)."""
    b = builder(ELECT_LEADERS, 2)
    topics = (
        None
        if partitions is None
        else tuple(
            b.TopicPartitions(topic=topic, partitions=tuple(indexes))
            for topic, indexes in _by_topic(partitions).items()
        )
    )
    with brokers.any() as c:
        r = c.call(
            ELECT_LEADERS,
            2,
            election_type=ELECTION_TYPES[election],
            topic_partitions=topics,
            timeout=TIMEOUT_MS,
        )
    check("elect leaders", r.error_code)
    return {
        _partition_key(t.topic, p.partition_id): refusal(
            f"elect a leader of {t.topic}-{p.partition_id}", p.error_code, p.error_message
        )
        for t in r.replica_election_results
        for p in t.partition_result
    }


# ---------------------------------------------------------------- partitions and records

CREATE_PARTITIONS, DELETE_RECORDS = 37, 21


def create_partitions(
    brokers: Brokers,
    name: str,
    count: int,
    assignments: list[list[int]] | None = None,
    validate_only: bool = False,
) -> None:
    """CreatePartitions (kafka-topics.sh --alter --partitions): raise the topic's partition
    count to `count`; `assignments` the replicas of each new partition (None: the cluster
    places them)."""
    b = builder(CREATE_PARTITIONS, 3)
    topic = b.CreatePartitionsTopic(
        name=name,
        count=count,
        assignments=None
        if assignments is None
        else tuple(b.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments),
    )
    with brokers.any() as c:
        r = c.call(
            CREATE_PARTITIONS, 3, topics=(topic,), timeout=TIMEOUT_MS, validate_only=validate_only
        )
    (result,) = r.results
    check(f"add partitions to {name}", result.error_code, result.error_message)


def delete_records(
    brokers: Brokers, offsets: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int | AdminError]:
    """DeleteRecords (kafka-delete-records.sh) at each partition's leader: the records before
    each offset (-1: the high watermark) go. Each partition's new low watermark, or its error."""
    info = metadata(brokers, sorted({t for t, _ in offsets}))
    leaders = {(t.name, p.partition): p.leader for t in info.topics for p in t.partitions}
    out: dict[tuple[str, int], int | AdminError] = {}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in offsets:
        leader = leaders.get(tp)
        if leader is None or leader < 0:
            code = (
                ErrorCode.unknown_topic_or_partition
                if leader is None
                else ErrorCode.leader_not_available
            )
            out[tp] = AdminError(f"delete records of {tp[0]}-{tp[1]}", code)
        else:
            by_leader.setdefault(leader, []).append(tp)
    b = builder(DELETE_RECORDS, 2)
    for node, tps in by_leader.items():
        broker = info.brokers[node]
        request = tuple(
            b.DeleteRecordsTopic(
                name=topic,
                partitions=tuple(
                    b.DeleteRecordsPartition(partition_index=p, offset=offsets[(topic, p)])
                    for p in parts
                ),
            )
            for topic, parts in _by_topic(tps).items()
        )
        with brokers.at(broker.host, broker.port, timeout=TIMEOUT_MS / 1000 + 15) as c:
            r = c.call(DELETE_RECORDS, 2, topics=request, timeout=TIMEOUT_MS)
        for t in r.topics:
            for p in t.partitions:
                what = f"delete records of {t.name}-{p.partition_index}"
                error = refusal(what, p.error_code, None)
                out[(t.name, p.partition_index)] = p.low_watermark if error is None else error
    return out


# ---------------------------------------------------------------- log dirs and features

DESCRIBE_LOG_DIRS, API_VERSIONS, UPDATE_FEATURES = 35, 18, 57
UPGRADE_TYPES = {"upgrade": 1, "safe-downgrade": 2, "unsafe-downgrade": 3}


@dataclass
class ReplicaInDir:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirInfo:
    path: str
    error: str  # "" or Kafka's error name (KAFKA_STORAGE_ERROR: the directory failed)
    total_bytes: int
    usable_bytes: int
    replicas: list[ReplicaInDir]


def describe_log_dirs(
    brokers: Brokers, broker_ids: Iterable[int] | None = None
) -> dict[int, list[LogDirInfo] | Exception]:
    """DescribeLogDirs v4 at each broker (or those of ``broker_ids``), as
    kafka-log-dirs.sh --describe does."""
    info = metadata(brokers, [])
    wanted = sorted(info.brokers) if broker_ids is None else list(broker_ids)
    out: dict[int, list[LogDirInfo] | Exception] = {}
    for node in wanted:
        broker = info.brokers.get(node)
        if broker is None:
            out[node] = AdminError(
                f"describe the log dirs of broker {node}",
                ErrorCode.broker_not_available,
                "no such live broker",
            )
            continue
        try:
            with brokers.at(broker.host, broker.port, timeout=10) as c:
                r = c.call(DESCRIBE_LOG_DIRS, 4, topics=None)
            check(f"describe the log dirs of broker {node}", r.error_code)
        except (OSError, AdminError) as e:
            out[node] = e
            continue
        out[node] = [
            LogDirInfo(
                d.log_dir,
                "" if d.error_code == ErrorCode.none else d.error_code.name.upper(),
                d.total_bytes,
                d.usable_bytes,
                [
                    ReplicaInDir(
                        t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key
                    )
                    for t in d.topics
                    for p in t.partitions
                ],
            )
            for d in r.results
        ]
    return out


@dataclass
class FeatureInfo:
    name: str
    supported_min: int
    supported_max: int
    finalized: int  # 0: not finalized


def describe_features(brokers: Brokers) -> tuple[list[FeatureInfo], int]:
    """The supported and finalized feature levels and their epoch, from ApiVersions v4 (as
    kafka-features.sh describe, through Admin.describeFeatures)."""
    with brokers.any() as c:
        r = c.call(API_VERSIONS, 4, client_software_name="rafka", client_software_version="1")
    check("describe the features", r.error_code)
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    features = [
        FeatureInfo(f.name, f.min_version, f.max_version, finalized.pop(f.name, 0))
        for f in r.supported_features
    ]
    features += [FeatureInfo(name, 0, 0, level) for name, level in finalized.items()]
    return sorted(features, key=lambda f: f.name), r.finalized_features_epoch


def update_features(
    brokers: Brokers, levels: dict[str, int], upgrade_type: str, validate_only: bool
) -> None:
    """UpdateFeatures v1 (as kafka-features.sh upgrade/downgrade): all or none; raises
    AdminError with the cluster's reason."""
    b = builder(UPDATE_FEATURES, 1)
    with brokers.any() as c:
        r = c.call(
            UPDATE_FEATURES,
            1,
            timeout=TIMEOUT_MS,
            feature_updates=tuple(
                b.FeatureUpdateKey(
                    feature=name, max_version_level=level, upgrade_type=UPGRADE_TYPES[upgrade_type]
                )
                for name, level in levels.items()
            ),
            validate_only=validate_only,
        )
    check("update the features", r.error_code, r.error_message)
    for result in r.results:
        check(f"update feature {result.feature}", result.error_code, result.error_message)


# ---------------------------------------------------------------- configs (kafka-configs.sh)

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
CONFIG_RESOURCE_TYPES = {
    "topic": 2,
    "broker": 4,
    "broker-logger": 8,
    "client-metrics": 16,
    "group": 32,
}
CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


@dataclass
class ConfigInfo:
    name: str
    value: str | None  # None: sensitive, or no value
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]]  # (name, value, source), highest first
    documentation: str | None


def _config_connection(brokers: Brokers, resource: str, name: str) -> KafkaConnection:
    """Where a resource's configs are asked for: a broker's (and its loggers') on that broker,
    as Kafka's admin client sends them; the rest to any broker."""
    if resource not in ("broker", "broker-logger") or not name:
        return brokers.any()
    node = metadata(brokers, []).brokers.get(int(name))
    if node is None:
        raise AdminError(f"broker {name}", ErrorCode.broker_not_available, "no such live broker")
    return brokers.at(node.host, node.port)


def describe_configs(brokers: Brokers, resource: str, name: str) -> list[ConfigInfo]:
    """DescribeConfigs v4 of one resource ("topic", "broker" with "" for the cluster-wide
    defaults, "broker-logger", "group", "client-metrics"), with synonyms and documentation."""
    b = builder(DESCRIBE_CONFIGS, 4)
    with _config_connection(brokers, resource, name) as c:
        r = c.call(
            DESCRIBE_CONFIGS,
            4,
            resources=(
                b.DescribeConfigsResource(
                    resource_type=CONFIG_RESOURCE_TYPES[resource],
                    resource_name=name,
                    configuration_keys=None,
                ),
            ),
            include_synonyms=True,
            include_documentation=True,
        )
    (result,) = r.results
    check(f"describe the configs of {resource} {name!r}", result.error_code, result.error_message)
    return [
        ConfigInfo(
            e.name,
            e.value,
            CONFIG_SOURCES.get(e.config_source, str(e.config_source)),
            e.read_only,
            e.is_sensitive,
            [(s.name, s.value, CONFIG_SOURCES.get(s.source, str(s.source))) for s in e.synonyms],
            e.documentation,
        )
        for e in result.configs
    ]


def alter_configs(
    brokers: Brokers,
    resource: str,
    name: str,
    add: dict[str, str],
    delete: list[str],
    validate_only: bool = False,
) -> None:
    """IncrementalAlterConfigs v1 of one resource: SET each of `add`, DELETE each of `delete`
    (as kafka-configs.sh --alter --add-config/--delete-config); raises AdminError with the
    cluster's reason."""
    b = builder(INCREMENTAL_ALTER_CONFIGS, 1)
    ops = [(k, 0, v) for k, v in add.items()] + [(k, 1, None) for k in delete]
    with _config_connection(brokers, resource, name) as c:
        r = c.call(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=(
                b.AlterConfigsResource(
                    resource_type=CONFIG_RESOURCE_TYPES[resource],
                    resource_name=name,
                    configs=tuple(
                        b.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                    ),
                ),
            ),
            validate_only=validate_only,
        )
    (result,) = r.responses
    check(f"alter the configs of {resource} {name!r}", result.error_code, result.error_message)
