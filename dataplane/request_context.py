"""What a request is served with: its header, the connection it came on, and the broker's
services; and what it is answered with (`Body`, `Response`).

A handler sees the broker only through `BrokerServices`, the few components `dataplane.broker`
wires once at start-up (as Kafka's BrokerServer hands its KafkaApis the managers it needs), so
nothing under handlers/ imports the broker or the server. A check every request must pass (an
authorizer) belongs in one place: the server's dispatch, which builds each `RequestContext`.
The context sits below the handlers (as Kafka's RequestContext sits in its network layer), so
the helpers handlers share (quota throttling, config and ACL checks, group and share-group
requests) take it without importing the handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.connection import Connection
from dataplane.protocol.codec import RequestHeader
from dataplane.protocol.encoders import Bytes

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.coordinator.service import GroupCoordinator
    from dataplane.fetch_session import FetchSessionCache
    from dataplane.metadata_cache import MetadataCache
    from dataplane.producer_ids import ProducerIdManager
    from dataplane.quota.manager import QuotaManagers
    from dataplane.replica.manager import ReplicaManager
    from dataplane.security.authorizer import Authorizer
    from dataplane.security.sasl import SaslAuthenticator
    from dataplane.share.group_settings import GroupConfigs
    from dataplane.share.manager import SharePartitionManager
    from dataplane.share.model import Persister
    from dataplane.telemetry.subscriptions import ClientMetricsManager
    from dataplane.topic_admin import TopicAdmin
    from dataplane.transaction.coordinator import TransactionCoordinator
    from dataplane.transaction.verification import TxnVerifier
    from meta.client import MetaClient


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The broker's components handlers use; one instance serves every request."""

    config: BrokerConfig
    cache: MetadataCache
    replicas: ReplicaManager
    topic_admin: TopicAdmin
    producer_ids: ProducerIdManager
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator  # transactional ids of __transaction_state
    txn_verifier: TxnVerifier  # KIP-890: partition leaders ask the coordinator before appending
    offsets_topic: InternalTopic  # __consumer_offsets: where groups are coordinated
    transactions_topic: InternalTopic  # __transaction_state: where transactional ids are
    share_state_topic: InternalTopic  # __share_group_state: where share-partition state is
    meta: MetaClient  # for the cluster state handlers change directly (ACLs, SCRAM, tokens)
    authorizer: Authorizer
    sasl: SaslAuthenticator
    telemetry: ClientMetricsManager  # KIP-714 client metrics subscriptions and pushes
    group_settings: GroupConfigs  # groups' GROUP configs over the group.* defaults
    share_persister: Persister  # share-partition state, through the share coordinator
    share_partitions: SharePartitionManager  # the share-partitions this broker leads
    quotas: QuotaManagers  # client quotas (dataplane/quota): each type's `enabled` flag
    fetch_sessions: FetchSessionCache  # incremental fetch sessions (KIP-227)


@dataclass(slots=True)
class RequestContext:
    services: BrokerServices
    header: RequestHeader
    conn: Connection
    supported: Mapping[int, tuple[int, int]]  # API key -> (min, max) version served
    # Set by quota enforcement: how long this request's client is throttled (ms); the server
    # records it as the request's ThrottleTimeMs (dataplane/metrics/requests.py).
    throttle_ms: float = 0.0
    size: int = 0  # bytes of the request frame (producer_byte_rate counts them)


Body: TypeAlias = bytes | list[Bytes] | Payload
"""A response body: encoded by a fast encoder (bytes, or buffers to send back to back), or a kio
response object the server encodes."""

Response: TypeAlias = Body | Awaitable[Body] | None
"""What a handler returns: the body; an awaitable of it when the answer must wait (acks=all,
a fetch long poll), while the server goes on reading the connection and keeps answers in
request order (an awaitable whose `ready` attribute is true would not wait: the server writes
it with the answers beside it); None for no answer at all (acks=0)."""
