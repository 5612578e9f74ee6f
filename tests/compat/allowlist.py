"""Differences from Apache Kafka that a user would accept, each with its reason. A case listed
here still runs and is reported ("allowlisted"), so the table shows every difference.

Most entries are Kafka broker settings Rafka does not list in DescribeConfigs (a setting listed
that does nothing would mislead `kafka-configs --describe --all`), by the part of Kafka they
belong to, and the few Rafka settings that read differently by nature.
"""

from __future__ import annotations

_AUTO_CREATE = (
    "Kafka 4 sends the creation to its controller and answers UNKNOWN_TOPIC_OR_PARTITION at "
    "once; Rafka creates the topic before answering, so the first Metadata already lists it "
    "(a client retries Metadata on that error, and then sees the same topic on both)"
)

TOPIC, BROKER = "DescribeConfigs of a topic: ", "DescribeConfigs of a broker: "


def _cases(reason: str, prefix: str, names: str) -> dict[str, str]:
    """`reason` for the case of each of the space-separated config `names`."""
    return {prefix + name: reason for name in names.split()}


# -- Kafka settings Rafka does not list, by what they belong to ---------------------------------

_TIERED = (
    "tiered storage (KIP-405) is not implemented: every segment stays on the broker's disks, "
    "so none of its settings exist"
)
_CONTROLLER = (
    "Rafka's controller is its own meta service (`rafka meta`: meta.quorum.voters, "
    "meta.listener, and there auto.leader.rebalance.enable and "
    "leader.imbalance.check.interval.seconds); a broker has no KRaft role, controller client, "
    "metadata log or registration settings"
)
_INTER_BROKER = (
    "followers replicate over Rafka's replication gRPC (replication.listener, secured by "
    "internal.secret), not as Kafka clients of the leader: Kafka's inter-broker client, "
    "fetcher and SASL-login settings have no counterpart"
)
_JVM = (
    "internals of Kafka's JVM broker (thread pools, request queue, purgatories, buffers, "
    "checkpoint and flush timers, coordinator runtimes): a Rafka broker is one asyncio process "
    "without these parts"
)
_PLUGINS = (
    "Java plugin classes, JCA providers and JMX metrics: Rafka loads no Java code (its "
    "metrics are Prometheus', metrics.port)"
)
_KERBEROS = "GSSAPI (Kerberos) is not implemented (PLAIN, SCRAM and OAUTHBEARER are)"
_JKS = (
    "Rafka reads PEM stores only (ssl.keystore.type and ssl.truststore.type are PEM): there "
    "are no JKS/PKCS12 store passwords (an encrypted key's password is ssl.key.password)"
)
_STREAMS = (
    "streams groups (KIP-1071) use the sticky assignor, computed when members or topics change: "
    "Kafka 4.4's assignment batching (assignment intervals), rack-aware standby placement and "
    "topology description plugin are not implemented"
)
_PROTOCOLS = (
    "Rafka serves every group protocol (classic, consumer, streams: Kafka's default list); the "
    "list cannot be narrowed"
)
_GROUP_EXTRAS = (
    "Kafka 4.4's group assignment batching, pluggable share assignors and share-group "
    "dead-letter queues (KIP-1191) are not implemented: a group's assignment is computed when "
    "its members change"
)
_RECOMPRESSION = (
    "Rafka recompresses a batch (into a topic's compression.type other than `producer`) at "
    "each codec's default level: Kafka's compression.*.level settings are not implemented; "
    "inflating client data is bounded by 100 x max.message.bytes instead of "
    "max.decompressed.message.bytes"
)
_FIXED = (
    "behaviour fixed at Kafka's default, not a setting: topics can always be deleted, a broker "
    "always shuts down in a controlled way, transactional writes are always verified (KIP-890), "
    "and log.dirs is the only log directory setting"
)
_NOT_YET = {
    "connection.failed.authentication.delay.ms": (
        "not implemented: a connection that fails to authenticate is closed at once"
    ),
    "cordoned.log.dirs": "cordoning log directories (KIP-1066) is not implemented",
    "log.dir.failure.timeout.ms": (
        "a failed log directory takes its replicas offline at once (the meta service moves "
        "their leadership to other replicas); the broker keeps serving its other directories "
        "instead of stopping after a timeout"
    ),
    "max.connection.creation.rate": (
        "a connection creation rate limit is not implemented (max.connections and "
        "max.connections.per.ip are)"
    ),
    "sasl.oauthbearer.allow.unverified.audience": (
        "Rafka's OAUTHBEARER validator checks the audience when "
        "sasl.oauthbearer.expected.audience is set, and has no option to skip it"
    ),
    "sasl.oauthbearer.allow.unverified.issuer": (
        "Rafka's OAUTHBEARER validator checks the issuer when sasl.oauthbearer.expected.issuer "
        "is set, and has no option to skip it"
    ),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (
        "Rafka reloads the JWKS every sasl.oauthbearer.jwks.endpoint.refresh.ms, without "
        "Kafka's retry backoff"
    ),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (
        "Rafka reloads the JWKS every sasl.oauthbearer.jwks.endpoint.refresh.ms, without "
        "Kafka's retry backoff"
    ),
    "transaction.two.phase.commit.enable": (
        "two-phase commit with an external transaction manager (KIP-939) is not implemented"
    ),
}
_TLS_CONTEXT = (
    "Rafka's TLS context takes its versions from ssl.enabled.protocols, and reloads rewritten "
    "store files without comparing the certificate's names"
)
_MIGRATION = (
    "Rafka has no online migration between the classic and consumer group protocols: a group "
    "id changes type only while the group is empty, as in Kafka with "
    "group.consumer.migration.policy=disabled (to move a group to the other protocol, stop its "
    "consumers, then start them with the new group.protocol)"
)

_NOT_LISTED = {
    **_cases(
        _TIERED,
        TOPIC,
        "local.retention.bytes local.retention.ms remote.copy.lag.bytes remote.copy.lag.ms "
        "remote.log.copy.disable remote.log.delete.on.disable remote.storage.enable",
    ),
    **_cases(
        _TIERED,
        BROKER,
        "follower.fetch.last.tiered.offset.enable log.local.retention.bytes "
        "log.local.retention.ms log.remote.copy.lag.bytes log.remote.copy.lag.ms "
        "remote.fetch.max.wait.ms remote.list.offsets.request.timeout.ms "
        "remote.log.index.file.cache.total.size.bytes remote.log.manager.copier.thread.pool.size "
        "remote.log.manager.copy.max.bytes.per.second remote.log.manager.copy.quota.window.num "
        "remote.log.manager.copy.quota.window.size.seconds "
        "remote.log.manager.expiration.thread.pool.size "
        "remote.log.manager.fetch.max.bytes.per.second remote.log.manager.fetch.quota.window.num "
        "remote.log.manager.fetch.quota.window.size.seconds "
        "remote.log.manager.follower.thread.pool.size remote.log.manager.task.interval.ms "
        "remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes "
        "remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path "
        "remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name "
        "remote.log.reader.max.pending.tasks remote.log.reader.threads "
        "remote.log.storage.manager.class.name remote.log.storage.manager.class.path "
        "remote.log.storage.manager.impl.prefix remote.log.storage.system.enable",
    ),
    **_cases(
        _CONTROLLER,
        BROKER,
        "auto.leader.rebalance.enable broker.id controller.listener.names "
        "controller.quorum.append.linger.ms controller.quorum.auto.join.enable "
        "controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms "
        "controller.quorum.election.timeout.ms controller.quorum.fetch.max.bytes "
        "controller.quorum.fetch.snapshot.max.bytes controller.quorum.fetch.timeout.ms "
        "controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms "
        "controller.quorum.voters controller.socket.timeout.ms early.start.listeners "
        "initial.broker.registration.timeout.ms leader.imbalance.check.interval.seconds "
        "metadata.log.dir metadata.log.max.record.bytes.between.snapshots "
        "metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes "
        "metadata.log.segment.ms metadata.max.idle.interval.ms metadata.max.retention.bytes "
        "metadata.max.retention.ms process.roles sasl.mechanism.controller.protocol",
    ),
    **_cases(
        _INTER_BROKER,
        BROKER,
        "alter.log.dirs.replication.quota.window.num "
        "alter.log.dirs.replication.quota.window.size.seconds inter.broker.listener.name "
        "replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes "
        "replica.fetch.response.max.bytes replica.fetch.wait.max.ms "
        "replica.socket.receive.buffer.bytes replica.socket.timeout.ms "
        "replication.quota.window.num replication.quota.window.size.seconds request.timeout.ms "
        "sasl.client.callback.handler.class sasl.login.callback.handler.class sasl.login.class "
        "sasl.login.connect.timeout.ms sasl.login.read.timeout.ms "
        "sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds "
        "sasl.login.refresh.window.factor sasl.login.refresh.window.jitter "
        "sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms "
        "sasl.mechanism.inter.broker.protocol sasl.oauthbearer.assertion.algorithm "
        "sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds "
        "sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include "
        "sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub "
        "sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.private.key.file "
        "sasl.oauthbearer.assertion.private.key.passphrase "
        "sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id "
        "sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.scope "
        "sasl.oauthbearer.token.endpoint.url security.inter.broker.protocol "
        "socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms "
        "ssl.endpoint.identification.algorithm",
    ),
    **_cases(
        _JVM,
        BROKER,
        "add.partitions.to.txn.retry.backoff.max.ms add.partitions.to.txn.retry.backoff.ms "
        "background.threads delegation.token.expiry.check.interval.ms "
        "delete.records.purgatory.purge.interval.requests fetch.purgatory.purge.interval.requests "
        "group.coordinator.append.linger.ms group.coordinator.background.threads "
        "group.coordinator.cached.buffer.max.bytes group.coordinator.threads "
        "log.cleaner.dedupe.buffer.size log.cleaner.io.buffer.load.factor "
        "log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second log.cleaner.threads "
        "log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms "
        "log.flush.start.offset.checkpoint.interval.ms num.io.threads num.network.threads "
        "num.recovery.threads.per.data.dir num.replica.alter.log.dirs.threads "
        "num.replica.fetchers offsets.commit.timeout.ms offsets.load.buffer.size "
        "producer.purgatory.purge.interval.requests queued.max.request.bytes queued.max.requests "
        "replica.high.watermark.checkpoint.interval.ms share.coordinator.append.linger.ms "
        "share.coordinator.cached.buffer.max.bytes share.coordinator.load.buffer.size "
        "share.coordinator.snapshot.update.records.per.snapshot share.coordinator.threads "
        "share.coordinator.write.timeout.ms share.fetch.purgatory.purge.interval.requests "
        "socket.listen.backlog.size socket.receive.buffer.bytes socket.send.buffer.bytes "
        "transaction.state.log.load.buffer.size",
    ),
    **_cases(
        _PLUGINS,
        BROKER,
        "alter.config.policy.class.name client.quota.callback.class config.providers "
        "create.topic.policy.class.name kafka.metrics.polling.interval.secs "
        "kafka.metrics.reporters metric.reporters metrics.num.samples metrics.recording.level "
        "metrics.sample.window.ms principal.builder.class sasl.oauthbearer.jwt.retriever.class "
        "sasl.oauthbearer.jwt.validator.class sasl.server.callback.handler.class "
        "security.providers ssl.engine.factory.class ssl.keymanager.algorithm ssl.provider "
        "ssl.secure.random.implementation ssl.trustmanager.algorithm",
    ),
    **_cases(
        _KERBEROS,
        BROKER,
        "sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin "
        "sasl.kerberos.principal.to.local.rules sasl.kerberos.service.name "
        "sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor",
    ),
    **_cases(_JKS, BROKER, "ssl.keystore.password ssl.truststore.password"),
    **_cases(
        _STREAMS,
        BROKER,
        "group.streams.assignment.interval.ms group.streams.assignors "
        "group.streams.max.assignment.interval.ms group.streams.min.assignment.interval.ms "
        "group.streams.rack.aware.assignment.tags group.streams.topology.description.plugin.class",
    ),
    **_cases(_PROTOCOLS, BROKER, "group.coordinator.rebalance.protocols"),
    **_cases(_GROUP_EXTRAS, TOPIC, "errors.deadletterqueue.group.enable"),
    **_cases(
        _GROUP_EXTRAS,
        BROKER,
        "errors.deadletterqueue.auto.create.topics.enable errors.deadletterqueue.topic.name.prefix "
        "group.consumer.assignment.interval.ms group.consumer.max.assignment.interval.ms "
        "group.consumer.min.assignment.interval.ms group.share.assignment.interval.ms "
        "group.share.assignors group.share.max.assignment.interval.ms "
        "group.share.min.assignment.interval.ms",
    ),
    **_cases(_MIGRATION, BROKER, "group.consumer.migration.policy"),
    **_cases(
        _RECOMPRESSION,
        TOPIC,
        "compression.gzip.level compression.lz4.level compression.zstd.level "
        "max.decompressed.message.bytes",
    ),
    **_cases(
        _RECOMPRESSION,
        BROKER,
        "compression.gzip.level compression.lz4.level compression.zstd.level "
        "max.decompressed.message.bytes offsets.topic.compression.codec "
        "share.coordinator.state.topic.compression.codec",
    ),
    **_cases(
        _FIXED,
        BROKER,
        "controlled.shutdown.enable delete.topic.enable log.dir "
        "transaction.partition.verification.enable",
    ),
    **{BROKER + name: reason for name, reason in _NOT_YET.items()},
    **_cases(_TLS_CONTEXT, BROKER, "ssl.allow.dn.changes ssl.allow.san.changes ssl.protocol"),
}

# -- settings both list, read differently by nature ---------------------------------------------

_ELR = (
    "Kafka 4.4 runs with Eligible Leader Replicas (KIP-966), whose controller writes a "
    "cluster-wide dynamic min.insync.replicas at bootstrap (so it reads DYNAMIC_DEFAULT_BROKER_"
    "CONFIG); Rafka has no ELR and takes the broker's own setting: the same value, 1"
)
_RESTART = (
    "Kafka reconfigures listeners, their TLS and SASL settings and producer.id.expiration.ms "
    "on a running broker; Rafka reads them at start (AlterConfigs refuses them, saying to "
    "restart; certificates rewritten in the store files are reloaded within 2 s), so it "
    "reports them read-only"
)
_NO_GSSAPI = (
    "Kafka's default is GSSAPI (Kerberos), which Rafka does not have; Rafka enables the "
    "mechanisms it implements"
)

_READ_DIFFERENTLY = {
    TOPIC + "min.insync.replicas": _ELR,
    BROKER + "min.insync.replicas": _ELR,
    "DescribeConfigs of the cluster-wide broker defaults": _ELR,
    **_cases(
        _RESTART,
        BROKER,
        "listeners listener.security.protocol.map producer.id.expiration.ms sasl.jaas.config "
        "ssl.cipher.suites ssl.client.auth ssl.enabled.protocols ssl.key.password "
        "ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location "
        "ssl.truststore.certificates ssl.truststore.location",
    ),
    BROKER + "sasl.enabled.mechanisms": _NO_GSSAPI + "; " + _RESTART,
    BROKER + "ssl.keystore.type": _JKS + "; " + _RESTART,
    BROKER + "ssl.truststore.type": _JKS + "; " + _RESTART,
    "DescribeConfigs of a broker: configs Kafka does not list": (
        "Rafka's own settings: its meta service and replication addresses "
        "(meta.bootstrap.servers, replication.listener, advertised.replication.listener), the "
        "internal.* security of that traffic (secrets described without their value), "
        "metrics.port, the bootstrap transaction.version, and "
        "min.incremental.fetch.session.eviction.ms (a constant in Kafka)"
    ),
}

_KAFKA_20785 = (
    "Kafka 4.4.0 predates KAFKA-20785 (apache/kafka#23204): with transaction version 2 it "
    "takes a commit at the epoch just before an abort's bump (a commit that raced the "
    "coordinator's timeout abort) for a retry and answers INVALID_TXN_STATE, which is fatal "
    "for the producer; Rafka answers PRODUCER_FENCED as Kafka does since that fix, and the "
    "client recovers (a new producer continues)"
)

# -- answers ------------------------------------------------------------------------------------

_ANSWERS = {
    "DescribeConfigs: broker keys with synonyms in other units": (
        "the documentation of broker settings is Rafka's own: it says what Rafka does with "
        "each (topic configs carry Kafka's texts); values, sources and synonyms are the same"
    ),
    "IncrementalAlterConfigs: an unknown operation": (
        "Kafka fails with UNKNOWN_SERVER_ERROR (the operation id does not parse); Rafka "
        "answers INVALID_REQUEST with the reason, which clients treat the same way"
    ),
    "IncrementalAlterConfigs of a broker: an unknown setting": (
        "Kafka stores any broker config name, known or not; Rafka refuses a name it does not "
        "have (INVALID_REQUEST, naming it): a typo, or a Kafka setting Rafka does not have "
        "(see the DescribeConfigs rows), would otherwise be stored and do nothing"
    ),
}

_SHARE_INIT = (
    "Kafka 4.4 assigns a share-partition only once the group coordinator has initialized its "
    "state in the share coordinator, so a new share member's first heartbeat gets no "
    "partitions and a later one gets them at a group epoch one higher; Rafka initializes a "
    "share-partition's state on its first ShareFetch and assigns it at once (its share "
    "consumers start fetching a heartbeat earlier; their group epochs are one lower)"
)

_SHARE_START = (
    "Rafka writes a share-partition's start offset (from share.auto.offset.reset) when the "
    "partition is first fetched, so a failover before the first acknowledgement never skips "
    "records already delivered, and DescribeShareGroupOffsets shows it and the lag from then "
    "on; Kafka 4.4 writes it with the first acknowledgement and answers -1 until then"
)

_SHARE_START_AFTER = (
    "Kafka 4.4 writes a share-partition's state with the start offset it had before the "
    "acknowledgements being written moved it (the next write carries the new one), so "
    "DescribeShareGroupOffsets shows an older start offset than Rafka's, which writes the start "
    "offset the acknowledgements moved it to; the lag is the same"
)

_GROUPS = {
    "Online migration: ConsumerGroupHeartbeat joining a live classic group": _MIGRATION,
    "Online migration: JoinGroup to a live consumer group": _MIGRATION,
    "ShareGroupHeartbeat: a member joins": _SHARE_INIT,
    "Share group offsets: describe before any acknowledgement": _SHARE_START,
    **{
        f"Share group offsets: {step}": _SHARE_START_AFTER
        for step in ("describe v0", "describe v1", "describe every topic")
    },
    **{
        f"ShareFetch v{v}: describe offsets{after}": _SHARE_START_AFTER
        for v in (1, 2)
        for after in ("", " after")
    },
}

# -- security (tests/compat/security/) ----------------------------------------------------------

_MECHANISM_ORDER = (
    "the same enabled mechanisms: Kafka lists them in the iteration order of a Java HashSet "
    "(PLAIN, SCRAM-SHA-512, SCRAM-SHA-256), Rafka in the order of sasl.enabled.mechanisms; no "
    "client reads the order"
)
_BAD_ACL_CODE = (
    "Kafka's broker cannot build a binding or filter with this code: ANY fails it with "
    "UNKNOWN_SERVER_ERROR (an IllegalArgumentException it does not map), UNKNOWN makes the "
    "request unparseable and Kafka closes the connection; Rafka answers INVALID_REQUEST naming "
    "the field, which clients report as the same failure"
)
_SECURITY = {
    **dict.fromkeys(
        (
            "SaslHandshake v0: GSSAPI (not enabled)",
            "SaslHandshake v1: GSSAPI (not enabled)",
            "SaslHandshake v0 + bare PLAIN token",
            "SaslHandshake: re-authentication with another mechanism",
        ),
        _MECHANISM_ORDER,
    ),
    "Metadata after SaslHandshake, before SaslAuthenticate": (
        "a client that skips SaslAuthenticate loses its connection on both: Kafka first answers "
        "the request with its error response (ILLEGAL_SASL_STATE where the API has an error "
        "field; an empty Metadata), Rafka closes at once and logs why"
    ),
    **dict.fromkeys(
        (
            *(
                f"CreateAcls: {what}"
                for what in (
                    "resource type ANY",
                    "resource type UNKNOWN",
                    "pattern type MATCH",
                    "pattern type ANY",
                    "pattern type UNKNOWN",
                    "operation ANY",
                    "operation UNKNOWN",
                    "permission ANY",
                )
            ),
            "DescribeAcls: resource type UNKNOWN",
            "DescribeAcls: pattern type UNKNOWN",
            "DescribeAcls: operation UNKNOWN",
            "DeleteAcls: pattern type UNKNOWN",
        ),
        _BAD_ACL_CODE,
    ),
    "DescribeUserScramCredentials as reader (no CLUSTER DESCRIBE)": (
        "Kafka's refusal of a describe of every user (users null) hits a NullPointerException "
        "and closes the connection; Rafka answers CLUSTER_AUTHORIZATION_FAILED (named users "
        "get the same answer on both)"
    ),
    "AlterUserScramCredentials: an empty salt": (
        "Kafka stores a SCRAM credential with an empty salt; Rafka refuses it "
        "(UNACCEPTABLE_CREDENTIAL): a salt-less credential defeats SCRAM's salting, and "
        "kafka-configs.sh always sends a random salt"
    ),
}

_SHARE_STATE_RPC = (
    "an inter-broker API: share-partition leaders read and write their state at the share "
    "coordinator; Rafka's brokers send that over their internal gRPC (proto/replication.proto), "
    "and no client sends it"
)

ALLOWED: dict[str, str] = {
    **{
        f"ApiVersions: {name} ({key})": _SHARE_STATE_RPC
        for key, name in (
            (83, "InitializeShareGroupState"),
            (84, "ReadShareGroupState"),
            (85, "WriteShareGroupState"),
            (86, "DeleteShareGroupState"),
            (87, "ReadShareGroupStateSummary"),
        )
    },
    "Metadata v1: unknown topic, auto-created": _AUTO_CREATE,
    "Metadata v12: unknown topic, auto-created": _AUTO_CREATE,
    **_NOT_LISTED,
    **_READ_DIFFERENTLY,
    **_ANSWERS,
    "EndTxn v5: a commit that raced the timeout abort (KAFKA-20785)": _KAFKA_20785,
    "EndTxn v5: a commit at the epoch before the abort's bump": _KAFKA_20785,
    "tool: share: describe, all consumed": (
        "Kafka's share-partition leader writes the state with the start offset it had before "
        "the acknowledgements it writes (they count as delivered), and moves it only in memory "
        "until the next write; Rafka writes the start offset past them. Both show lag 0"
    ),
    **_GROUPS,
    **_SECURITY,
}
