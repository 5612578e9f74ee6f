"""One broker process: registers with the meta service, follows its metadata, serves Kafka.

Start-up order matters: the broker registers (getting its broker epoch), waits for the first
metadata snapshot (so leadership is known and logs are opened and recovered), and only then
opens the Kafka listener, so clients never see a broker that knows nothing.
"""

from __future__ import annotations

import logging
import signal
import uuid
from functools import partial

import anyio

from common.internal_security import InternalSecurity, InternalSecurityError
from dataplane import metrics, server
from dataplane.config import BrokerConfig
from dataplane.connection_quotas import ConnectionQuotas
from dataplane.coordinator.runtime import InternalTopic
from dataplane.coordinator.service import GroupCoordinator, group_config
from dataplane.dynamic_config import DynamicBrokerConfig
from dataplane.fetch_session import FetchSessionCache
from dataplane.gc_tuning import keep_frozen, tune_collector
from dataplane.log import StateStore
from dataplane.log.log_dirs import LogDirs
from dataplane.malloc import tune_for_large_buffers
from dataplane.metadata_cache import MetadataCache
from dataplane.producer_ids import ProducerIdManager
from dataplane.quota import quota_managers
from dataplane.replica.fetcher import ReplicaFetchers
from dataplane.replica.isr import IsrManager
from dataplane.replica.manager import ReplicaManager
from dataplane.replica.peers import PeerChannels
from dataplane.replica.replication_service import serve_replication
from dataplane.replica.throttle import ReplicationThrottle
from dataplane.request_context import BrokerServices
from dataplane.security.authorizer import Authorizer, AuthorizerConfigError
from dataplane.security.listeners import ListenerConfigError, broker_listeners
from dataplane.security.sasl import SaslAuthenticator, SaslConfigError
from dataplane.security.tls import ServerTls, TlsConfigError
from dataplane.share.group_settings import GroupConfigs
from dataplane.share.manager import SharePartitionManager
from dataplane.share.persister import SharePersister
from dataplane.share.state_coordinator import ShareCoordinator
from dataplane.share.state_rpc import ShareStateRpcHandlers
from dataplane.telemetry.collector import TelemetryCollector
from dataplane.telemetry.subscriptions import ClientMetricsManager
from dataplane.topic_admin import TopicAdmin
from dataplane.transaction.config import transaction_config
from dataplane.transaction.coordinator import TransactionCoordinator
from dataplane.transaction.markers import TxnMarkerSender, TxnRpcHandlers
from dataplane.transaction.verification import TxnVerifier
from meta.client import MetaClient, MetaError

log = logging.getLogger("rafka.broker")


class Broker:
    """One broker process: wires its components, each given only what it uses (as Kafka's
    BrokerServer does), and runs them. Handlers get `services`."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        # Bad listener or TLS settings stop the broker here, before it registers.
        self.listeners = broker_listeners(config)
        self.tls = {
            listener.name: ServerTls(config, listener.name, listener.security_protocol)
            for listener in self.listeners.bound
            if listener.tls
        }
        # log.dirs: the first directory also holds the state store (dataplane/log/log_dirs.py)
        self.log_dirs = LogDirs.from_config(config.log_dirs)
        self.log_dirs.create_all()
        self.log_dirs.clean_up_moves()
        self.store = StateStore(self.log_dirs.state_dir)
        self.cache = MetadataCache()
        self.security = InternalSecurity.from_config(config)
        self.meta = MetaClient(
            [s.strip() for s in config.meta_bootstrap_servers.split(",") if s.strip()],
            security=self.security,
        )
        self.broker_epoch = -1  # set by each registration
        self.producer_ids = ProducerIdManager(self.meta, self.node_id, self._broker_epoch)
        self.topic_admin = TopicAdmin(
            self.meta, self.cache, config.num_partitions, config.default_replication_factor
        )
        # internal topics are created through the meta service on first use
        create_internal = partial(self.topic_admin.create_topics, validate_only=False)
        self.offsets_topic = InternalTopic(
            self.cache,
            create_internal,
            "__consumer_offsets",
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            {"cleanup.policy": "compact", "segment.bytes": str(config.offsets_topic_segment_bytes)},
        )
        self.transactions_topic = InternalTopic(
            self.cache,
            create_internal,
            "__transaction_state",
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "unclean.leader.election.enable": "false",
                # capped by the replication factor the topic gets (InternalTopic.create)
                "min.insync.replicas": str(max(1, config.transaction_state_log_min_isr)),
            },
        )
        self.share_state_topic = InternalTopic(
            self.cache,
            create_internal,
            "__share_group_state",
            config.share_coordinator_state_topic_num_partitions,
            config.share_coordinator_state_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.share_coordinator_state_topic_segment_bytes),
                "unclean.leader.election.enable": "false",
                # capped by the replication factor the topic gets (InternalTopic.create)
                "min.insync.replicas": str(max(1, config.share_coordinator_state_topic_min_isr)),
            },
        )
        self.isr = IsrManager(self.meta, self.node_id, self._broker_epoch)
        self.fetchers = ReplicaFetchers(
            self.cache,
            self.node_id,
            self._broker_epoch,
            self.security,
            ReplicationThrottle("follower", lambda: self.dynamic_config.current, self.cache),
        )
        # The settings in force: static ones under the dynamic broker configs (rafka configs).
        self.dynamic_config = DynamicBrokerConfig(config, self.cache)
        self.replicas = ReplicaManager(
            self.dynamic_config.current,
            self.store,
            self.cache,
            self.isr.submit,
            self.fetchers,
            self.log_dirs,
        )
        self.dynamic_config.listeners.append(self.replicas.reconfigure)
        self.connection_quotas = ConnectionQuotas(self.dynamic_config.current)
        self.dynamic_config.listeners.append(self.connection_quotas.configure)
        # Groups' settings: their GROUP configs over the broker's group.* defaults.
        self.group_settings = GroupConfigs(config, self.cache)
        # The group coordinator on the leaders of __consumer_offsets' partitions.
        self.group_coordinator = GroupCoordinator(
            group_config(config),
            self.cache,
            self.replicas,
            self.offsets_topic,
            self.meta,
            group_settings=self.group_settings,
        )
        # The transaction coordinator on the leaders of __transaction_state's partitions; the
        # markers it has partition leaders write; the partition leaders' KIP-890 checks.
        self.txn_markers = TxnMarkerSender(
            self.node_id, self.cache, self.replicas, self.security, self.group_coordinator
        )
        self.txn_coordinator = TransactionCoordinator(
            transaction_config(config),
            self.cache,
            self.replicas,
            self.transactions_topic,
            self.producer_ids,
            self.txn_markers,
        )
        self.txn_verifier = TxnVerifier(
            self.node_id, self.cache, self.security, self.transactions_topic
        )
        self.txn_verifier.set_coordinator(self.txn_coordinator)
        # The share coordinator on the leaders of __share_group_state's partitions, and the
        # persister share-partition leaders and the group coordinator reach it through.
        self.share_coordinator = ShareCoordinator(self.replicas, self.share_state_topic)
        self.share_persister = SharePersister(
            self.node_id,
            self.cache,
            self.share_state_topic,
            PeerChannels(self.cache, self.security),
            self.share_coordinator,
        )
        # KIP-714: the CLIENT_METRICS subscriptions of the metadata, the clients' latest pushes
        self.telemetry = ClientMetricsManager(self.cache, config.telemetry_max_bytes)
        # Client quotas: the managers re-resolve on every quota change the cache applies.
        self.quotas = quota_managers(
            config.quota_window_num,
            config.quota_window_size_seconds,
            config.controller_quota_window_num,
            config.controller_quota_window_size_seconds,
        )
        self.cache.quota_listeners.append(lambda: self.quotas.update(self.cache.client_quotas))
        # The share-partitions this broker leads (ShareFetch, ShareAcknowledge).
        self.share_partitions = SharePartitionManager(
            self.replicas,
            self.share_persister,
            self.group_settings,
            config.group_share_max_share_sessions,
            config.group_share_session_timeout_ms,
        )
        self.services = BrokerServices(
            config=config,
            cache=self.cache,
            replicas=self.replicas,
            topic_admin=self.topic_admin,
            producer_ids=self.producer_ids,
            group_coordinator=self.group_coordinator,
            txn_coordinator=self.txn_coordinator,
            txn_verifier=self.txn_verifier,
            offsets_topic=self.offsets_topic,
            transactions_topic=self.transactions_topic,
            share_state_topic=self.share_state_topic,
            meta=self.meta,
            authorizer=Authorizer(config, self.cache),
            sasl=SaslAuthenticator(config, self.cache),
            telemetry=self.telemetry,
            share_persister=self.share_persister,
            share_partitions=self.share_partitions,
            group_settings=self.group_settings,
            quotas=self.quotas,
            fetch_sessions=FetchSessionCache(
                config.max_incremental_fetch_session_cache_slots,
                config.min_incremental_fetch_session_eviction_ms,
            ),
        )
        self.incarnation_id = uuid.uuid4().bytes
        self._session_scope: anyio.CancelScope | None = None
        self._replicas_ready = anyio.Event()

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT, then hand leadership away and shut down cleanly."""
        replication = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_signals, tg.cancel_scope)
                replication = await serve_replication(
                    self.cache,
                    self.replicas,
                    self.config.replication_listener,
                    self.security,
                    txn_handlers=TxnRpcHandlers(
                        self.txn_coordinator, self.replicas, self.group_coordinator
                    ),
                    share_state_handlers=ShareStateRpcHandlers(self.share_coordinator),
                )
                self.security.warn_if_open(
                    f"Broker {self.node_id}",
                    f"its replication port {self.config.replication_listener}",
                )
                await self._register()
                tg.start_soon(self._heartbeat_loop)
                tg.start_soon(self._session_loop)
                tg.start_soon(self._watch_metadata)
                await self._replicas_ready.wait()  # the first snapshot's replicas are open
                self.replicas.remove_stray_logs()
                tg.start_soon(self.fetchers.run)
                tg.start_soon(self.isr.run)
                tg.start_soon(self.replicas.shrink_isrs)
                tg.start_soon(self.producer_ids.run)
                tg.start_soon(self.replicas.maintain_logs)
                tg.start_soon(self.replicas.clean_logs)
                tg.start_soon(self.replicas.report_offline, self._report_offline)
                tg.start_soon(self.replicas.rehost, self._lead_again)
                tg.start_soon(self.replicas.moves.run)
                tg.start_soon(self.group_coordinator.run)  # runs its CoordinatorRuntime too
                tg.start_soon(self.txn_markers.run)
                tg.start_soon(self.txn_coordinator.run)  # runs its CoordinatorRuntime too
                tg.start_soon(self.share_coordinator.run)  # runs its CoordinatorRuntime too
                tg.start_soon(self.share_partitions.run)  # lock expiry
                tg.start_soon(keep_frozen, lambda: len(self.replicas.partitions))
                metrics.serve(
                    self.config.metrics_port,
                    self.replicas.partitions,
                    self.cache,
                    lambda: [s.offsets.committed for s in self.group_coordinator.loaded_shards()],
                    [TelemetryCollector(self.telemetry)],
                )
                await tg.start(
                    server.serve,
                    self.services,
                    self.listeners.bound,
                    self.tls,
                    self.connection_quotas,
                )
                log.info(
                    "broker %d ready: advertised %s, cluster %s",
                    self.node_id,
                    ",".join(f"{a.name}://{a.host}:{a.port}" for a in self.listeners.advertised),
                    self.cache.cluster_id,
                )
        finally:
            with anyio.CancelScope(shield=True):
                if replication is not None:
                    await replication.stop(grace=1)
                await self.txn_markers.close()
                await self.txn_verifier.close()
                await self.share_persister.close()
                self.replicas.close()
                self.store.close()
                await self.meta.close()
            log.info("broker %d stopped", self.node_id)

    async def _report_offline(self, partitions: list[tuple[str, int]]) -> None:
        """Replicas whose log directory failed: the meta service moves their leadership and
        ISR to the other replicas (as Kafka's broker heartbeat with offline log dirs)."""
        await self.meta.offline_replicas(self.node_id, self.broker_epoch, partitions)

    async def _lead_again(self, partitions: dict[str, list[int]]) -> None:
        """Replicas hosted again after a shortage of descriptors: a preferred leader election
        gives back the partitions that were left without a leader."""
        await self.meta.elect_leaders(topic_partitions=partitions)

    def _broker_epoch(self) -> int:
        """The current broker epoch, for the components that quote it to the meta service or
        to leaders (it changes with each registration)."""
        return self.broker_epoch

    async def _watch_signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                await self._controlled_shutdown()
                scope.cancel()
                return

    async def _controlled_shutdown(self) -> None:
        """Move every leadership away first, so clients fail over before we stop (Kafka's
        controlled.shutdown.enable)."""
        if self.broker_epoch < 0:
            return
        try:
            result = await self.meta.controlled_shutdown(self.node_id, self.broker_epoch)
        except MetaError as e:
            log.warning("controlled shutdown failed (%s); stopping anyway", e)
            return
        if result.may_exit:
            log.info("controlled shutdown done: broker %d leads no partition", self.node_id)
        else:
            log.warning(
                "controlled shutdown incomplete (%d leaderships left); stopping anyway — "
                "those partitions fail over when our lease expires",
                result.leaderships_left,
            )

    async def _register(self) -> None:
        advertised = self.listeners.advertised
        sent = self.replicas.meta_lease.now()
        self.broker_epoch = await self.meta.register_broker(
            node_id=self.node_id,
            host=advertised[0].host,
            port=advertised[0].port,
            endpoints=[(a.name, a.host, a.port, a.security_protocol) for a in advertised],
            rack=self.config.broker_rack or "",
            replication_endpoint=self.config.advertised_replication_listener
            or self.config.replication_listener,
            incarnation_id=self.incarnation_id,
        )
        self.replicas.meta_lease.renewed(sent)  # a registration renews a lease not yet run out
        log.info(
            "registered with the meta service as broker %d (epoch %d)",
            self.node_id,
            self.broker_epoch,
        )
        if self._session_scope is not None:
            self._session_scope.cancel()  # the session must carry the new epoch
        self.replicas.resend_offline()  # the meta service forgets them with the old epoch

    async def _session_loop(self) -> None:
        """Hold a session with the meta leader so a crash of this process fences it at once;
        a new registration (new broker epoch) restarts it."""
        while True:
            with anyio.CancelScope() as self._session_scope:
                await self.meta.hold_session(self.node_id, lambda: self.broker_epoch)

    async def _heartbeat_loop(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        lease = self.replicas.meta_lease
        while True:
            await anyio.sleep(interval)
            sent = lease.now()
            try:
                result = await self.meta.heartbeat(self.node_id, self.broker_epoch)
            except Exception as e:  # the client already retried every meta node
                log.warning(
                    "heartbeat to the meta service failed (%s); retrying — check meta nodes", e
                )
                lease.lapsed()  # logs when coordinating stops
                continue
            if not result.error_code:  # the meta service renewed the lease
                lease.renewed(sent, result.metadata_offset)
            if result.must_register:
                log.warning("meta service asked broker %d to register again", self.node_id)
                await self._register()

    async def _watch_metadata(self) -> None:
        async for event in self.meta.watch(self.cache.offset):
            self.cache.apply(event)
            await self.replicas.apply_changes()
            self.replicas.meta_lease.applied(self.cache.offset)
            self._replicas_ready.set()


def run_broker(config: BrokerConfig) -> None:
    """Entry point of `rafka broker`."""
    tune_for_large_buffers()
    tune_collector()
    try:
        broker = Broker(config)
    except (
        InternalSecurityError,
        AuthorizerConfigError,
        ListenerConfigError,
        TlsConfigError,
        SaslConfigError,
    ) as e:
        log.error("broker %d cannot start: %s", config.node_id, e)
        raise SystemExit(1) from None
    anyio.run(broker.run)
