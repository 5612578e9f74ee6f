"""The broker's view of the cluster metadata, fed by the meta service's watch stream.

Every broker holds the whole (small) metadata state, so Metadata requests and leadership
checks on the produce path never leave the process. Entries are immutable: a change replaces
an entry, and readers holding the old one see a consistent snapshot.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import anyio

from meta import entity_proto, quotas
from meta.acl import AclBinding
from meta.model import DelegationToken, ScramCredential
from proto import meta_pb2

log = logging.getLogger("rafka.metadata")


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    index: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # A reassignment in progress: replicas is then the target followed by the removing ones.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: bytes
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str]
    internal: bool


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None
    fenced: bool
    epoch: int
    replication_endpoint: str
    # listener name -> advertised (host, port); host/port above are the first listener's
    endpoints: Mapping[str, tuple[str, int]] = field(default_factory=dict)


def partition_info(p: meta_pb2.Partition) -> PartitionInfo:
    return PartitionInfo(
        p.index,
        tuple(p.replicas),
        tuple(p.isr),
        p.leader,
        p.leader_epoch,
        p.partition_epoch,
        tuple(p.adding_replicas),
        tuple(p.removing_replicas),
    )


def _topic(t: meta_pb2.Topic) -> TopicInfo:
    return TopicInfo(
        name=t.name,
        topic_id=bytes(t.topic_id),
        partitions=tuple(partition_info(p) for p in sorted(t.partitions, key=lambda p: p.index)),
        configs=entity_proto.configs_from_proto(t.configs),
        internal=t.internal,
    )


def _broker(b: meta_pb2.Broker) -> BrokerInfo:
    # No endpoints: registered before listeners were, host:port is its one PLAINTEXT listener.
    endpoints = {e.name: (e.host, e.port) for e in b.endpoints} or {"PLAINTEXT": (b.host, b.port)}
    return BrokerInfo(
        b.id, b.host, b.port, b.rack or None, b.fenced, b.epoch, b.replication_endpoint, endpoints
    )


TopicListener = Callable[[TopicInfo | None, TopicInfo | None], None]
BrokerListener = Callable[[BrokerInfo | None, BrokerInfo | None], None]


class MetadataCache:
    """Applies watch events and tells listeners which topics and brokers changed."""

    def __init__(self) -> None:
        self.cluster_id = ""
        self.offset = -1
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[bytes, TopicInfo] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        # Security metadata. The ACL set is replaced as a whole on every change and
        # acl_version moves then, so an authorizer rebuilds its index only when it must.
        self.acls: tuple[AclBinding, ...] = ()
        self.acl_version = 0
        self.scram_credentials: dict[tuple[str, str], ScramCredential] = {}  # (user, mechanism)
        self.delegation_tokens: dict[str, DelegationToken] = {}  # by token id
        # Dynamic broker configs by broker id, CLUSTER_DEFAULT (-1) the cluster-wide ones; the
        # config_listeners are called after every change of them (even to the same values:
        # an operator's AlterConfigs asks brokers to reload, as in Kafka).
        self.broker_configs: dict[int, Mapping[str, str]] = {}
        self.config_listeners: list[Callable[[], None]] = []
        # Finalized feature levels (a feature at level 0 is absent) and the metadata offset
        # they were last set at (Kafka's finalized features epoch).
        self.finalized_features: Mapping[str, int] = {}
        self.features_epoch = -1
        # GROUP (32) and CLIENT_METRICS (16) configs by (resource type, name); the version
        # moves on every change of them, so readers may cache what they derive from them.
        self._resource_configs: dict[tuple[int, str], Mapping[str, str]] = {}
        self.resource_configs_version = 0
        # Client quotas by entity (meta.quotas); the quota_listeners are called after every
        # change of them (the quota managers re-resolve, so a change applies at once).
        self.client_quotas: dict[quotas.QuotaEntity, Mapping[str, float]] = {}
        self.quota_listeners: list[Callable[[], None]] = []
        self.topic_listeners: list[TopicListener] = []
        self.broker_listeners: list[BrokerListener] = []
        self._changed = anyio.Event()
        self.ready = anyio.Event()  # set once the first snapshot (or change) has been applied

    # -- reads -------------------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerInfo]:
        return sorted((b for b in self.brokers.values() if not b.fenced), key=lambda b: b.id)

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic a request names by id (KIP-516; kio reads the zero id as
        None), or None when no topic has that id."""
        info = None if topic_id is None else self.topics_by_id.get(topic_id.bytes)
        return None if info is None else info.name

    def topic_id(self, name: str) -> bytes:
        """A topic's id, all zero for a topic this broker does not know."""
        info = self.topics.get(name)
        return bytes(16) if info is None else info.topic_id

    def controller_id(self) -> int:
        """Clients need some broker to send admin requests to; Kafka (KRaft) names a live one."""
        live = self.live_brokers()
        return live[0].id if live else -1

    def resource_configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        """The dynamic configs of a GROUP or CLIENT_METRICS resource (empty: none)."""
        return self._resource_configs.get((resource_type, name), {})

    def resource_names(self, resource_type: int) -> list[str]:
        """The names of the resources of a type that have configs, sorted."""
        return sorted(name for kind, name in self._resource_configs if kind == resource_type)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait for a metadata change that makes `predicate` true; False on timeout."""
        with anyio.move_on_after(timeout):
            while not predicate():
                await self._changed.wait()
            return True
        return False

    # -- writes (from the watch stream) --------------------------------------------------------

    def apply(self, event: meta_pb2.WatchEvent) -> None:  # noqa: C901 - one branch per WatchEvent kind
        kind = event.WhichOneof("kind")
        if kind == "snapshot":
            self._apply_snapshot(event.snapshot, event.offset)
        elif kind == "topic":
            self._set_topic(_topic(event.topic))
        elif kind == "topic_deleted":
            old = self.topics.get(event.topic_deleted.name)
            if old is not None and old.topic_id == bytes(event.topic_deleted.topic_id):
                self._remove_topic(old)
        elif kind == "broker":
            self._set_broker(_broker(event.broker))
        elif kind == "broker_unregistered":
            self._remove_broker(event.broker_unregistered.broker_id)
        elif kind == "acls":
            removed = set(map(entity_proto.acl_from_proto, event.acls.removed))
            kept = [b for b in self.acls if b not in removed]
            self._set_acls([*kept, *map(entity_proto.acl_from_proto, event.acls.added)])
        elif kind == "scram_credential":
            c = event.scram_credential
            self.scram_credentials[c.user, c.mechanism] = entity_proto.scram_from_proto(c)
        elif kind == "scram_credential_deleted":
            d = event.scram_credential_deleted
            self.scram_credentials.pop((d.user, d.mechanism), None)
        elif kind == "delegation_token":
            token = entity_proto.token_from_proto(event.delegation_token)
            self.delegation_tokens[token.token_id] = token
        elif kind == "delegation_token_removed":
            self.delegation_tokens.pop(event.delegation_token_removed.token_id, None)
        elif kind == "broker_config":
            configs = {event.broker_config.broker_id: dict(event.broker_config.configs)}
            self._set_broker_configs({**self.broker_configs, **configs}, always=True)
        elif kind == "features":
            self.finalized_features = dict(event.features.features)
            self.features_epoch = event.offset
        elif kind == "client_quota":
            entity = quotas.entity_from_proto(event.client_quota.entity)
            changed = dict(self.client_quotas)
            changed[entity] = dict(event.client_quota.values)
            self._set_client_quotas(changed)
        elif kind == "resource_config":
            rc = event.resource_config
            resources = dict(self._resource_configs)
            resources[rc.resource_type, rc.name] = dict(rc.configs)
            self._set_resource_configs(resources)
        self.offset = event.offset
        self.ready.set()
        self._changed.set()
        self._changed = anyio.Event()

    def _apply_snapshot(self, snap: meta_pb2.Snapshot, snap_offset: int) -> None:
        self.cluster_id = snap.cluster_id
        new_topics = {t.name: _topic(t) for t in snap.topics}
        for old in list(self.topics.values()):
            if new_topics.get(old.name) is None or new_topics[old.name].topic_id != old.topic_id:
                self._remove_topic(old)
        for topic in new_topics.values():
            self._set_topic(topic)
        new_brokers = {b.id: _broker(b) for b in snap.brokers}
        for gone in self.brokers.keys() - new_brokers.keys():
            self._remove_broker(gone)
        for broker in new_brokers.values():
            self._set_broker(broker)
        self._set_acls(map(entity_proto.acl_from_proto, snap.acls))
        self.scram_credentials = {
            (c.user, c.mechanism): entity_proto.scram_from_proto(c) for c in snap.scram_credentials
        }
        self.delegation_tokens = {
            t.token_id: t for t in map(entity_proto.token_from_proto, snap.delegation_tokens)
        }
        configs = {c.broker_id: dict(c.configs) for c in snap.broker_configs}
        self._set_broker_configs(configs, always=False)
        self.finalized_features = dict(snap.finalized_features)
        self.features_epoch = snap_offset
        self._set_client_quotas(
            {quotas.entity_from_proto(q.entity): dict(q.values) for q in snap.client_quotas}
        )
        self._set_resource_configs(
            {(rc.resource_type, rc.name): dict(rc.configs) for rc in snap.resource_configs}
        )

    def _set_client_quotas(self, changed: Mapping[quotas.QuotaEntity, Mapping[str, float]]) -> None:
        """Replace the client quotas (entities without quotas dropped); tell the listeners."""
        new = {entity: values for entity, values in changed.items() if values}
        if new == self.client_quotas:
            return
        self.client_quotas = new
        for listener in self.quota_listeners:
            listener()

    def _set_resource_configs(self, configs: Mapping[tuple[int, str], Mapping[str, str]]) -> None:
        configs = {key: c for key, c in configs.items() if c}
        if configs != self._resource_configs:
            self._resource_configs = configs
            self.resource_configs_version += 1

    def _set_broker_configs(self, configs: Mapping[int, Mapping[str, str]], always: bool) -> None:
        """Replace the dynamic broker configs (entries without configs dropped) and tell the
        config listeners, if they changed or ``always``."""
        configs = {broker_id: c for broker_id, c in configs.items() if c}
        if configs == self.broker_configs and not always:
            return
        self.broker_configs = configs
        for listener in self.config_listeners:
            listener()

    def _set_acls(self, bindings: Iterable[AclBinding]) -> None:
        acls = tuple(dict.fromkeys(bindings))  # each once, in creation order
        if acls != self.acls:
            self.acls = acls
            self.acl_version += 1

    def _set_topic(self, topic: TopicInfo) -> None:
        old = self.topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._remove_topic(old)
            old = None
        if old == topic:
            return
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic
        for listener in self.topic_listeners:
            listener(old, topic)

    def _remove_topic(self, topic: TopicInfo) -> None:
        del self.topics[topic.name]
        self.topics_by_id.pop(topic.topic_id, None)
        for listener in self.topic_listeners:
            listener(topic, None)

    def _set_broker(self, broker: BrokerInfo) -> None:
        old = self.brokers.get(broker.id)
        if old != broker:
            self.brokers[broker.id] = broker
            self._notify_broker(old, broker)

    def _remove_broker(self, broker_id: int) -> None:
        old = self.brokers.pop(broker_id, None)
        if old is not None:
            self._notify_broker(old, None)

    def _notify_broker(self, old: BrokerInfo | None, new: BrokerInfo | None) -> None:
        for listener in self.broker_listeners:
            listener(old, new)
