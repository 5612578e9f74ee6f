"""Broker settings, under Kafka's own names (see cluster/settings.py for where values come from)."""

from __future__ import annotations

from pydantic import Field

from cluster.settings import KafkaSettings


class BrokerConfig(KafkaSettings):
    """Settings of one broker. Names match Kafka's broker configs where Kafka has one."""

    node_id: int = Field(1, description="node.id: this broker's id, unique in the cluster.")
    listeners: str = Field(
        "PLAINTEXT://0.0.0.0:9092", description="listeners: where the Kafka protocol is served."
    )
    advertised_listeners: str = Field(
        "", description="advertised.listeners: the address clients are told (default: listeners)."
    )
    broker_rack: str | None = Field(None, description="broker.rack: rack id (KIP-392, KIP-36).")
    log_dirs: str = Field("./data/broker", description="log.dirs: where partition logs live.")
    meta_bootstrap_servers: str = Field(
        "127.0.0.1:9192",
        description="meta.bootstrap.servers: comma-separated host:port of the meta gRPC service.",
    )
    replication_listener: str = Field(
        "0.0.0.0:9392", description="replication.listener: host:port of the replication gRPC."
    )
    advertised_replication_listener: str = Field(
        "", description="advertised.replication.listener: what followers dial (default: above)."
    )
    num_partitions: int = Field(1, description="num.partitions: default partitions of a topic.")
    default_replication_factor: int = Field(1, description="default.replication.factor.")
    auto_create_topics_enable: bool = Field(True, description="auto.create.topics.enable.")
    min_insync_replicas: int = Field(1, description="min.insync.replicas (topic default).")
    unclean_leader_election_enable: bool = Field(
        False, description="unclean.leader.election.enable (topic default)."
    )
    message_max_bytes: int = Field(
        1048588, description="message.max.bytes: largest record batch accepted (topic default)."
    )
    socket_request_max_bytes: int = Field(
        104857600, description="socket.request.max.bytes: largest request frame accepted."
    )
    log_segment_bytes: int = Field(1073741824, description="log.segment.bytes: roll size.")
    log_roll_ms: int = Field(604800000, description="log.roll.ms: roll age (default 7 days).")
    log_index_interval_bytes: int = Field(
        4096, description="log.index.interval.bytes: bytes between sparse index entries."
    )
    log_flush_interval_messages: int = Field(
        9223372036854775807,
        description="log.flush.interval.messages: fsync after this many messages (default: never).",
    )
    log_flush_interval_ms: int = Field(
        9223372036854775807,
        description="log.flush.interval.ms: fsync after this long (Kafka default: never).",
    )
    log_message_timestamp_type: str = Field(
        "CreateTime", description="log.message.timestamp.type: CreateTime or LogAppendTime."
    )
    log_retention_ms: int = Field(604800000, description="log.retention.ms (default 7 days).")
    log_retention_bytes: int = Field(-1, description="log.retention.bytes (-1: unlimited).")
    log_retention_check_interval_ms: int = Field(
        300000, description="log.retention.check.interval.ms: how often retention runs."
    )
    log_cleaner_enable: bool = Field(
        True, description="log.cleaner.enable: compact topics with cleanup.policy=compact."
    )
    log_cleaner_backoff_ms: int = Field(
        15000, description="log.cleaner.backoff.ms: the cleaner's sleep when no log needs it."
    )
    log_cleaner_min_cleanable_ratio: float = Field(
        0.5,
        description="log.cleaner.min.cleanable.ratio: a log is cleaned once its uncleaned bytes "
        "exceed this share of it (topic: min.cleanable.dirty.ratio).",
    )
    log_cleaner_min_compaction_lag_ms: int = Field(
        0,
        description="log.cleaner.min.compaction.lag.ms: records stay uncompacted at least this "
        "long (topic: min.compaction.lag.ms).",
    )
    log_cleaner_max_compaction_lag_ms: int = Field(
        9223372036854775807,
        description="log.cleaner.max.compaction.lag.ms: a record stays uncompacted at most this "
        "long, whatever the ratio (topic: max.compaction.lag.ms).",
    )
    log_cleaner_delete_retention_ms: int = Field(
        86400000,
        description="log.cleaner.delete.retention.ms: tombstones are kept this long after their "
        "first cleaning (topic: delete.retention.ms).",
    )
    producer_id_expiration_ms: int = Field(
        86400000,
        description="producer.id.expiration.ms: idle idempotent producers are then forgotten.",
    )
    offsets_topic_num_partitions: int = Field(
        50, description="offsets.topic.num.partitions: partitions of __consumer_offsets."
    )
    offsets_topic_replication_factor: int = Field(
        3, description="offsets.topic.replication.factor (capped by the live brokers)."
    )
    offsets_topic_segment_bytes: int = Field(
        104857600, description="offsets.topic.segment.bytes: segment size of __consumer_offsets."
    )
    offsets_retention_minutes: int = Field(
        10080,
        description="offsets.retention.minutes: committed offsets of a group that has been "
        "empty this long (of a simple group: not committed for this long) are deleted.",
    )
    offsets_retention_check_interval_ms: int = Field(
        600000, description="offsets.retention.check.interval.ms: how often expiry runs."
    )
    offset_metadata_max_bytes: int = Field(
        4096, description="offset.metadata.max.bytes: largest metadata string of a commit."
    )
    group_min_session_timeout_ms: int = Field(
        6000, description="group.min.session.timeout.ms: shortest session a member may ask for."
    )
    group_max_session_timeout_ms: int = Field(
        1800000, description="group.max.session.timeout.ms: longest session a member may ask for."
    )
    group_initial_rebalance_delay_ms: int = Field(
        3000,
        description="group.initial.rebalance.delay.ms: a new group waits this long for more "
        "members before its first rebalance completes.",
    )
    group_max_size: int = Field(
        2147483647, description="group.max.size: most members a classic group may have."
    )
    group_consumer_session_timeout_ms: int = Field(
        45000,
        description="group.consumer.session.timeout.ms: a consumer group (KIP-848) member "
        "that sends no heartbeat for this long is removed.",
    )
    group_consumer_heartbeat_interval_ms: int = Field(
        5000,
        description="group.consumer.heartbeat.interval.ms: how often consumer group members "
        "heartbeat.",
    )
    group_consumer_max_size: int = Field(
        2147483647,
        description="group.consumer.max.size: most members a consumer group may have.",
    )
    group_consumer_assignors: str = Field(
        "uniform,range",
        description="group.consumer.assignors: the server-side assignors of consumer groups, "
        "the first the default (uniform, range; or Kafka's class names).",
    )
    transaction_state_log_num_partitions: int = Field(
        50, description="transaction.state.log.num.partitions: partitions of __transaction_state."
    )
    transaction_state_log_replication_factor: int = Field(
        3, description="transaction.state.log.replication.factor (capped by the live brokers)."
    )
    replica_lag_time_max_ms: int = Field(30000, description="replica.lag.time.max.ms.")
    broker_heartbeat_interval_ms: int = Field(
        2000, description="broker.heartbeat.interval.ms: lease renewal period."
    )
    broker_session_timeout_ms: int = Field(
        9000, description="broker.session.timeout.ms: lease length before a broker is fenced."
    )
    replica_selector_class: str = Field(
        "",
        description="replica.selector.class: set to "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector to let consumers read from "
        "an in-sync replica on their own rack (KIP-392, client.rack); empty: leader only.",
    )
    metrics_port: int = Field(0, description="metrics.port: Prometheus endpoint (0: off).")
