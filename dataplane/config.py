"""Broker settings, under Kafka's own names (see common/settings.py for where values come from)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from common.internal_security import InternalSecurityConfig
from common.settings import field_name


class BrokerConfig(InternalSecurityConfig):
    """Settings of one broker. Names match Kafka's broker configs where Kafka has one."""

    # listener.name.<listener>.<setting> and listener.name.<listener>.<mechanism>.<setting>
    PREFIXES: ClassVar[tuple[str, ...]] = ("listener.name.",)

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
    default_replication_factor: int = Field(
        1, description="default.replication.factor: replicas of a topic created without a count."
    )
    auto_create_topics_enable: bool = Field(
        True,
        description="auto.create.topics.enable: Metadata requests for an unknown topic create it.",
    )
    min_insync_replicas: int = Field(
        1,
        description="min.insync.replicas: the in-sync replicas an acks=all write needs "
        "(topic default).",
    )
    unclean_leader_election_enable: bool = Field(
        False,
        description="unclean.leader.election.enable: a replica outside the ISR may become leader "
        "when no in-sync one is left (topic default).",
    )
    message_max_bytes: int = Field(
        1048588, description="message.max.bytes: largest record batch accepted (topic default)."
    )
    socket_request_max_bytes: int = Field(
        104857600, description="socket.request.max.bytes: largest request frame accepted."
    )
    fetch_max_bytes: int = Field(
        57671680,
        ge=1024,
        description="fetch.max.bytes: the most bytes of records one fetch answer carries, "
        "whatever its max_bytes (at least one batch: KIP-74).",
    )
    max_connections: int = Field(
        2147483647,
        ge=0,
        description="max.connections: connections the broker keeps at once; at the limit it "
        "accepts no more until one closes (lowered dynamically: the least recently used close).",
    )
    max_connections_per_ip: int = Field(
        2147483647,
        ge=0,
        description="max.connections.per.ip: connections from one IP address at once; a new "
        "one past it is closed.",
    )
    max_connections_per_ip_overrides: str = Field(
        "",
        description="max.connections.per.ip.overrides: per-IP or hostname limits over "
        "max.connections.per.ip, e.g. hostName:100,127.0.0.1:200.",
    )
    connections_max_idle_ms: int = Field(
        600000,
        ge=1,
        description="connections.max.idle.ms: a connection that sends and receives nothing "
        "for this long is closed.",
    )
    quota_window_num: int = Field(
        11,
        ge=1,
        description="quota.window.num: samples a client quota rate is measured over.",
    )
    quota_window_size_seconds: int = Field(
        1, ge=1, description="quota.window.size.seconds: the time span of each quota sample."
    )
    controller_quota_window_num: int = Field(
        11,
        ge=1,
        description="controller.quota.window.num: samples of controller_mutation_rate quotas "
        "(the token bucket holds this many windows of mutations).",
    )
    controller_quota_window_size_seconds: int = Field(
        1,
        ge=1,
        description="controller.quota.window.size.seconds: the time span of each sample of "
        "controller_mutation_rate quotas.",
    )
    max_request_partition_size_limit: int = Field(
        2000,
        description="max.request.partition.size.limit: the most partitions one "
        "DescribeTopicPartitions answer holds (a cursor points to the rest).",
    )
    log_segment_bytes: int = Field(
        1073741824, description="log.segment.bytes: the size at which a segment is rolled."
    )
    log_roll_ms: int = Field(604800000, description="log.roll.ms: roll age (default 7 days).")
    log_index_interval_bytes: int = Field(
        4096, description="log.index.interval.bytes: bytes between sparse index entries."
    )
    log_index_size_max_bytes: int = Field(
        10485760,
        description="log.index.size.max.bytes: the default segment.index.bytes of topics "
        "(accepted for compatibility: Rafka's indexes do not preallocate).",
    )
    log_roll_jitter_ms: int | None = Field(
        None,
        description="log.roll.jitter.ms: the default segment.jitter.ms of topics (accepted for "
        "compatibility: segments roll without jitter).",
    )
    log_roll_jitter_hours: int = Field(
        0, description="log.roll.jitter.hours: log.roll.jitter.ms in hours, when that is not set."
    )
    log_segment_delete_delay_ms: int = Field(
        60000,
        description="log.segment.delete.delay.ms: the default file.delete.delay.ms of topics "
        "(accepted for compatibility: a deleted segment's files go at once).",
    )
    log_preallocate: bool = Field(
        False,
        description="log.preallocate: the default preallocate of topics (accepted for "
        "compatibility: segments are not preallocated).",
    )
    compression_type: str = Field(
        "producer",
        description="compression.type: the default compression.type of topics: producer "
        "(batches stored as the producer compressed them), uncompressed, gzip, snappy, lz4 or "
        "zstd (batches in another codec are stored recompressed in it).",
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
    log_message_timestamp_before_max_ms: int = Field(
        9223372036854775807,
        ge=0,
        description="log.message.timestamp.before.max.ms: how far before the broker's clock a "
        "CreateTime timestamp may be (INVALID_TIMESTAMP past it; default: no limit).",
    )
    log_message_timestamp_after_max_ms: int = Field(
        3600000,
        ge=0,
        description="log.message.timestamp.after.max.ms: how far after the broker's clock a "
        "CreateTime timestamp may be (INVALID_TIMESTAMP past it; default 1 hour, as Kafka 4).",
    )
    log_retention_ms: int = Field(
        604800000,
        description="log.retention.ms: how long a segment is kept after its newest record "
        "(default 7 days; -1: no limit).",
    )
    log_retention_minutes: int | None = Field(
        None,
        description="log.retention.minutes: retention in minutes, used when log.retention.ms is "
        "not set.",
    )
    log_retention_hours: int = Field(
        168,
        description="log.retention.hours: retention in hours, used when neither "
        "log.retention.ms nor log.retention.minutes is set.",
    )
    log_roll_hours: int = Field(
        168, description="log.roll.hours: roll age in hours, used when log.roll.ms is not set."
    )
    log_cleanup_policy: str = Field(
        "delete",
        description="log.cleanup.policy: delete, compact or both: the default cleanup.policy "
        "of topics.",
    )
    log_retention_bytes: int = Field(
        -1, description="log.retention.bytes: the most bytes a partition keeps (-1: unlimited)."
    )
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
        3,
        ge=1,
        description="offsets.topic.replication.factor: __consumer_offsets is created once this "
        "many brokers are alive (COORDINATOR_NOT_AVAILABLE until then).",
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
    group_share_session_timeout_ms: int = Field(
        45000,
        description="group.share.session.timeout.ms: a share group member that sends no "
        "heartbeat for this long is removed.",
    )
    group_share_heartbeat_interval_ms: int = Field(
        5000,
        description="group.share.heartbeat.interval.ms: how often share group members heartbeat.",
    )
    group_share_max_size: int = Field(
        200, description="group.share.max.size: most members a share group may have."
    )
    group_share_record_lock_duration_ms: int = Field(
        30000,
        description="group.share.record.lock.duration.ms: how long a share consumer holds "
        "records it acquired before they become available again (a group may set "
        "share.record.lock.duration.ms within the min/max below).",
    )
    group_share_min_record_lock_duration_ms: int = Field(
        15000,
        description="group.share.min.record.lock.duration.ms: the shortest lock a group may set.",
    )
    group_share_max_record_lock_duration_ms: int = Field(
        60000,
        description="group.share.max.record.lock.duration.ms: the longest lock a group may set.",
    )
    group_share_delivery_count_limit: int = Field(
        5,
        description="group.share.delivery.count.limit: deliveries after which a record that "
        "was not accepted is archived (a poison record is not redelivered forever).",
    )
    group_share_min_delivery_count_limit: int = Field(
        2, description="group.share.min.delivery.count.limit: the lowest limit a group may set."
    )
    group_share_max_delivery_count_limit: int = Field(
        10, description="group.share.max.delivery.count.limit: the highest limit a group may set."
    )
    group_share_partition_max_record_locks: int = Field(
        2000,
        description="group.share.partition.max.record.locks: most records of a share-partition "
        "in flight (acquired, or delivered and not yet acknowledged) at once.",
    )
    group_consumer_min_session_timeout_ms: int = Field(
        45000,
        description="group.consumer.min.session.timeout.ms: the lowest consumer.session.timeout.ms "
        "a group config may set.",
    )
    group_consumer_max_session_timeout_ms: int = Field(
        60000,
        description="group.consumer.max.session.timeout.ms: the highest "
        "consumer.session.timeout.ms a group config may set.",
    )
    group_consumer_min_heartbeat_interval_ms: int = Field(
        5000,
        description="group.consumer.min.heartbeat.interval.ms: the lowest "
        "consumer.heartbeat.interval.ms a group config may set.",
    )
    group_consumer_max_heartbeat_interval_ms: int = Field(
        15000,
        description="group.consumer.max.heartbeat.interval.ms: the highest "
        "consumer.heartbeat.interval.ms a group config may set.",
    )
    group_share_min_session_timeout_ms: int = Field(
        45000,
        description="group.share.min.session.timeout.ms: the lowest share.session.timeout.ms a "
        "group config may set.",
    )
    group_share_max_session_timeout_ms: int = Field(
        60000,
        description="group.share.max.session.timeout.ms: the highest share.session.timeout.ms a "
        "group config may set.",
    )
    group_share_min_heartbeat_interval_ms: int = Field(
        5000,
        description="group.share.min.heartbeat.interval.ms: the lowest "
        "share.heartbeat.interval.ms a group config may set.",
    )
    group_share_max_heartbeat_interval_ms: int = Field(
        15000,
        description="group.share.max.heartbeat.interval.ms: the highest "
        "share.heartbeat.interval.ms a group config may set.",
    )
    group_share_min_partition_max_record_locks: int = Field(
        100,
        description="group.share.min.partition.max.record.locks: the lowest "
        "share.partition.max.record.locks a group config may set.",
    )
    group_share_max_partition_max_record_locks: int = Field(
        4000,
        description="group.share.max.partition.max.record.locks: the highest "
        "share.partition.max.record.locks a group config may set.",
    )
    group_share_max_share_sessions: int = Field(
        2000, description="group.share.max.share.sessions: share sessions a broker keeps at most."
    )
    group_streams_session_timeout_ms: int = Field(
        45000,
        description="group.streams.session.timeout.ms: a streams group (KIP-1071) member that "
        "sends no heartbeat for this long is removed and its tasks move.",
    )
    group_streams_min_session_timeout_ms: int = Field(
        45000,
        description="group.streams.min.session.timeout.ms: the lowest streams.session.timeout.ms "
        "a group config may set.",
    )
    group_streams_max_session_timeout_ms: int = Field(
        60000,
        description="group.streams.max.session.timeout.ms: the highest "
        "streams.session.timeout.ms a group config may set.",
    )
    group_streams_heartbeat_interval_ms: int = Field(
        5000,
        description="group.streams.heartbeat.interval.ms: how often streams group members "
        "heartbeat.",
    )
    group_streams_min_heartbeat_interval_ms: int = Field(
        5000,
        description="group.streams.min.heartbeat.interval.ms: the lowest "
        "streams.heartbeat.interval.ms a group config may set.",
    )
    group_streams_max_heartbeat_interval_ms: int = Field(
        15000,
        description="group.streams.max.heartbeat.interval.ms: the highest "
        "streams.heartbeat.interval.ms a group config may set.",
    )
    group_streams_max_size: int = Field(
        2147483647, description="group.streams.max.size: most members a streams group may have."
    )
    group_streams_num_standby_replicas: int = Field(
        0,
        description="group.streams.num.standby.replicas: standby replicas of each stateful task "
        "of a streams group (the application's num.standby.replicas is ignored with "
        "group.protocol=streams; a group may set streams.num.standby.replicas).",
    )
    group_streams_max_standby_replicas: int = Field(
        2,
        description="group.streams.max.standby.replicas: the highest "
        "streams.num.standby.replicas a group config may set.",
    )
    group_streams_initial_rebalance_delay_ms: int = Field(
        3000,
        description="group.streams.initial.rebalance.delay.ms: a new streams group waits this "
        "long for more members before assigning its tasks.",
    )
    share_coordinator_state_topic_num_partitions: int = Field(
        50,
        description="share.coordinator.state.topic.num.partitions: partitions of "
        "__share_group_state.",
    )
    share_coordinator_state_topic_replication_factor: int = Field(
        3,
        ge=1,
        description="share.coordinator.state.topic.replication.factor: __share_group_state is "
        "created once this many brokers are alive (COORDINATOR_NOT_AVAILABLE until then).",
    )
    share_coordinator_state_topic_min_isr: int = Field(
        2,
        description="share.coordinator.state.topic.min.isr: min.insync.replicas of "
        "__share_group_state (capped by its replication factor).",
    )
    share_coordinator_state_topic_segment_bytes: int = Field(
        104857600,
        description="share.coordinator.state.topic.segment.bytes: segment size of "
        "__share_group_state.",
    )
    transaction_state_log_num_partitions: int = Field(
        50, description="transaction.state.log.num.partitions: partitions of __transaction_state."
    )
    transaction_state_log_replication_factor: int = Field(
        3,
        ge=1,
        description="transaction.state.log.replication.factor: __transaction_state is created "
        "once this many brokers are alive (COORDINATOR_NOT_AVAILABLE until then).",
    )
    transaction_state_log_min_isr: int = Field(
        2,
        description="transaction.state.log.min.isr: min.insync.replicas of __transaction_state "
        "(capped by its replication factor).",
    )
    transaction_state_log_segment_bytes: int = Field(
        104857600,
        description="transaction.state.log.segment.bytes: segment size of __transaction_state.",
    )
    transaction_max_timeout_ms: int = Field(
        900000,
        description="transaction.max.timeout.ms: the longest transaction.timeout.ms a producer "
        "may ask for (INVALID_TRANSACTION_TIMEOUT above).",
    )
    transactional_id_expiration_ms: int = Field(
        604800000,
        description="transactional.id.expiration.ms: a transactional id with no transaction "
        "for this long is forgotten.",
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(
        10000,
        description="transaction.abort.timed.out.transaction.cleanup.interval.ms: how often "
        "transactions open longer than their timeout are aborted.",
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Field(
        3600000,
        description="transaction.remove.expired.transaction.cleanup.interval.ms: how often "
        "expired transactional ids are removed.",
    )
    transaction_version: int = Field(
        2,
        ge=0,
        le=2,
        description="transaction.version: the finalized transaction.version feature level "
        "ApiVersions advertises (2: KIP-890 transactions, what Kafka 4 clients use; 1 or 0: "
        "the classic protocol only).",
    )
    replica_lag_time_max_ms: int = Field(
        30000,
        description="replica.lag.time.max.ms: a follower not caught up for this long leaves "
        "the ISR.",
    )
    leader_replication_throttled_rate: int = Field(
        9223372036854775807,
        ge=0,
        description="leader.replication.throttled.rate: bytes/s this broker sends to followers "
        "of the replicas a topic's leader.replication.throttled.replicas names (Kafka sets it "
        "dynamically: rafka configs; default unlimited).",
    )
    follower_replication_throttled_rate: int = Field(
        9223372036854775807,
        ge=0,
        description="follower.replication.throttled.rate: bytes/s this broker fetches for the "
        "replicas a topic's follower.replication.throttled.replicas names (default unlimited).",
    )
    broker_heartbeat_interval_ms: int = Field(
        2000, description="broker.heartbeat.interval.ms: lease renewal period."
    )
    broker_session_timeout_ms: int = Field(
        9000, description="broker.session.timeout.ms: lease length before a broker is fenced."
    )
    max_incremental_fetch_session_cache_slots: int = Field(
        1000,
        ge=0,
        description="max.incremental.fetch.session.cache.slots: incremental fetch sessions "
        "(KIP-227) this broker keeps; when full a new one may evict an idle or smaller one "
        "(0: no sessions, every fetch lists all its partitions).",
    )
    min_incremental_fetch_session_eviction_ms: int = Field(
        120000,
        ge=0,
        description="min.incremental.fetch.session.eviction.ms: a fetch session unused this "
        "long may be evicted by any new one, and younger ones only by a privileged or larger "
        "one (Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS; settable for tests).",
    )
    replica_selector_class: str = Field(
        "",
        description="replica.selector.class: set to "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector to let consumers read from "
        "an in-sync replica on their own rack (KIP-392, client.rack); empty: leader only.",
    )
    metrics_port: int = Field(0, description="metrics.port: Prometheus endpoint (0: off).")
    telemetry_max_bytes: int = Field(
        1048576,
        ge=1,
        description="telemetry.max.bytes: the largest client telemetry push (KIP-714) the "
        "broker accepts, compressed or not; larger ones get TELEMETRY_TOO_LARGE.",
    )

    # -- listeners and TLS (Kafka's names; each may be set per listener, see listener_value) --
    listener_security_protocol_map: str = Field(
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        description="listener.security.protocol.map: listener name -> security protocol.",
    )
    ssl_keystore_type: str = Field("PEM", description="ssl.keystore.type: PEM only.")
    ssl_keystore_location: str = Field(
        "", description="ssl.keystore.location: PEM file with the certificate chain and key."
    )
    ssl_keystore_certificate_chain: str = Field(
        "", description="ssl.keystore.certificate.chain: inline PEM certificate chain."
    )
    ssl_keystore_key: str = Field("", description="ssl.keystore.key: inline PEM private key.")
    ssl_key_password: str = Field("", description="ssl.key.password: of an encrypted key.")
    ssl_truststore_type: str = Field("PEM", description="ssl.truststore.type: PEM only.")
    ssl_truststore_location: str = Field(
        "", description="ssl.truststore.location: PEM file of the CAs client certificates chain to."
    )
    ssl_truststore_certificates: str = Field(
        "", description="ssl.truststore.certificates: inline PEM CA certificates."
    )
    ssl_client_auth: str = Field(
        "none", description="ssl.client.auth: required, requested or none."
    )
    ssl_enabled_protocols: str = Field(
        "TLSv1.2,TLSv1.3", description="ssl.enabled.protocols: TLS versions accepted."
    )
    ssl_cipher_suites: str = Field(
        "", description="ssl.cipher.suites: OpenSSL cipher list (empty: the library's default)."
    )
    ssl_principal_mapping_rules: str = Field(
        "DEFAULT",
        description="ssl.principal.mapping.rules: RULE:pattern/replacement/[LU], ... DEFAULT "
        "(the certificate subject's distinguished name).",
    )

    # -- SASL --
    sasl_enabled_mechanisms: str = Field(
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        description="sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.",
    )
    sasl_jaas_config: str = Field(
        "",
        description="sasl.jaas.config: JAAS login module configuration (PLAIN: user_<name>=...);"
        " usually set as listener.name.<listener>.<mechanism>.sasl.jaas.config.",
    )
    sasl_server_max_receive_size: int = Field(
        524288, description="sasl.server.max.receive.size: largest SASL token accepted."
    )
    connections_max_reauth_ms: int = Field(
        0,
        description="connections.max.reauth.ms: SASL sessions last at most this long, then "
        "the client must re-authenticate (KIP-368); 0: forever.",
    )
    sasl_oauthbearer_jwks_endpoint_url: str = Field(
        "",
        description="sasl.oauthbearer.jwks.endpoint.url: https:// or file: JWKS that signs "
        "OAUTHBEARER tokens (empty: Kafka's unsecured validator, for development only).",
    )
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = Field(
        3600000, description="sasl.oauthbearer.jwks.endpoint.refresh.ms: JWKS reload period."
    )
    sasl_oauthbearer_expected_audience: str = Field(
        "", description="sasl.oauthbearer.expected.audience: comma-separated accepted audiences."
    )
    sasl_oauthbearer_expected_issuer: str = Field(
        "", description="sasl.oauthbearer.expected.issuer: the issuer tokens must name."
    )
    sasl_oauthbearer_sub_claim_name: str = Field(
        "sub", description="sasl.oauthbearer.sub.claim.name: the claim that names the principal."
    )
    sasl_oauthbearer_scope_claim_name: str = Field(
        "scope", description="sasl.oauthbearer.scope.claim.name: the claim that holds scopes."
    )
    sasl_oauthbearer_clock_skew_seconds: int = Field(
        30, description="sasl.oauthbearer.clock.skew.seconds: tolerance on exp/nbf/iat."
    )
    delegation_token_secret_key: str = Field(
        "",
        description="delegation.token.secret.key: HMAC key of delegation tokens, the same on "
        "every broker (empty: delegation tokens are disabled).",
    )
    delegation_token_max_lifetime_ms: int = Field(
        604800000, description="delegation.token.max.lifetime.ms: no renewal goes past this."
    )
    delegation_token_expiry_time_ms: int = Field(
        86400000, description="delegation.token.expiry.time.ms: default renew interval."
    )

    # -- authorization --
    authorizer_class_name: str = Field(
        "",
        description="authorizer.class.name: "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on (empty: off).",
    )
    super_users: str = Field(
        "", description="super.users: principals allowed everything, ';'-separated (User:admin)."
    )
    allow_everyone_if_no_acl_found: bool = Field(
        False,
        description="allow.everyone.if.no.acl.found: a resource no ACL matches is open to all.",
    )

    def listener_value(self, listener: str, name: str, mechanism: str = "") -> str:
        """A setting as it applies on one listener (and SASL mechanism), as Kafka resolves it:
        listener.name.<listener>.<mechanism>.<name>, then listener.name.<listener>.<name>, then
        the broker-wide setting."""
        prefix = f"listener.name.{listener.lower()}."
        for key in ([f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []) + [
            f"{prefix}{name}"
        ]:
            if key in self.prefixed:
                return self.prefixed[key]
        value = getattr(self, field_name(name), "")
        return "" if value is None else str(value)
