"""The asyncio client brokers use to talk to the meta service.

Given every meta node's gRPC address, it hides which node answers: it tries them in turn, follows
the leader redirects of leader-only calls and retries transient failures until a deadline. A
``watch`` stream survives the loss of its node by resuming on another from the last offset it
delivered. Writes carry a request id reused by all retries, so none is applied twice.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc
from grpc import aio

from common.grpc_cancellation import rpc
from common.internal_security import InternalSecurity
from meta import entity_proto, resource_configs, wire
from meta.acl import AclBinding, AclBindingFilter
from meta.model import (
    ConfigAlteration,
    DelegationToken,
    Endpoint,
    ReassignmentInfo,
    ScramCredential,
)
from meta.protocol import LEADER_METADATA_KEY, ErrorCode
from meta.quotas import QuotaAlteration, alterations_to_proto
from meta.resource_configs import ResourceConfigAlteration
from proto import meta_pb2, meta_pb2_grpc

log = logging.getLogger("rafka.meta.client")

# Failures worth another try, possibly on another node.
_RETRIABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.CANCELLED,  # the server cancels calls when it shuts down
}
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),  # notice a dead node behind a silent network
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 200),  # a restarted node is used again quickly
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),  # snapshots of large clusters
]
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


class MetaError(Exception):
    """A meta call failed for good: not retriable, or no node succeeded before the deadline."""


class MetaRequestError(MetaError):
    """The meta service refused the request with a Kafka error code."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(f"{message} (error code {error_code})")
        self.error_code = error_code


@dataclass(frozen=True)
class HeartbeatResult:
    fenced: bool
    must_register: bool  # the epoch is stale or the broker unknown: call register_broker
    error_code: int = ErrorCode.NONE
    error_message: str = ""
    should_shut_down: bool = False  # in a controlled shutdown and leads nothing: may exit
    metadata_offset: int = -1  # the leader's metadata offset when it answered


@dataclass(frozen=True)
class ControlledShutdownResult:
    may_exit: bool  # it leads no partition any more (and is fenced): stop the process
    leaderships_left: int
    error_code: int = ErrorCode.NONE  # STALE_BROKER_EPOCH: not the current registration
    error_message: str = ""


class ProducerIdBlock(NamedTuple):
    first: int  # producer ids first .. first + size - 1 are this broker's
    size: int


class MetaClient:
    """Async client of the meta gRPC API; use ``async with`` or call ``close()``."""

    def __init__(
        self,
        addresses: str | Sequence[str],
        *,
        timeout_s: float = 30.0,
        attempt_timeout_s: float = 15.0,
        security: InternalSecurity | None = None,
    ) -> None:
        """``addresses``: meta gRPC host:port list (or a comma-separated string), tried in order.
        ``security``: the cluster's internal credentials (common.internal_security); None for
        a meta service that has none.

        A call gives up after ``timeout_s``; one attempt on one node after ``attempt_timeout_s``
        (longer than the nodes' meta.write.timeout.ms, so a node can report its own timeout).
        """
        if isinstance(addresses, str):
            addresses = addresses.split(",")
        self._addresses = [address.strip() for address in addresses if address.strip()]
        if not self._addresses:
            raise ValueError("MetaClient needs at least one meta node address")
        self._current = 0
        self._channels: dict[str, aio.Channel] = {}
        self._timeout_s = timeout_s
        self._attempt_timeout_s = attempt_timeout_s
        self._security = security or InternalSecurity()

    async def __aenter__(self) -> MetaClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    # ------------------------------------------------------------ brokers

    async def register_broker(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        rack: str | None = None,
        replication_endpoint: str = "",
        incarnation_id: bytes,
        endpoints: Sequence[tuple[str, str, int, str]] | None = None,
    ) -> int:
        """Register (or re-register) a broker, unfencing it; returns its new broker epoch.

        ``host``/``port``: the first Kafka listener advertised to clients; ``endpoints``: every
        advertised listener as (listener name, host, port, security protocol), names unique
        (None: one listener "PLAINTEXT" at host:port); ``rack``: None or "" for none.
        ``incarnation_id`` (e.g. ``uuid.uuid4().bytes``) must be new for every start of the
        broker process and stay the same for its re-registrations.
        """
        if endpoints is None:
            endpoints = [("PLAINTEXT", host, port, "PLAINTEXT")]
        request = meta_pb2.RegisterBrokerRequest(
            request_id=_request_id(),
            broker_id=node_id,
            host=host,
            port=port,
            rack=rack or "",
            replication_endpoint=replication_endpoint,
            incarnation_id=incarnation_id,
            endpoints=[entity_proto.endpoint_to_proto(Endpoint(*e)) for e in endpoints],
        )
        response: meta_pb2.RegisterBrokerResponse = await self._call("RegisterBroker", request)
        return response.broker_epoch

    async def heartbeat(self, node_id: int, broker_epoch: int) -> HeartbeatResult:
        """Renew the broker's lease (and unfence it if it was fenced)."""
        request = meta_pb2.HeartbeatRequest(broker_id=node_id, broker_epoch=broker_epoch)
        response = await self._call("Heartbeat", request)
        return HeartbeatResult(
            fenced=response.fenced,
            must_register=response.error_code
            in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED),
            error_code=response.error_code,
            error_message=response.error_message,
            should_shut_down=response.should_shut_down,
            metadata_offset=response.metadata_offset,
        )

    async def controlled_shutdown(
        self,
        node_id: int,
        broker_epoch: int,
        *,
        timeout_s: float = 30.0,
        poll_interval_s: float = 0.5,
    ) -> ControlledShutdownResult:
        """Hand over every leadership of the broker and take it out of every ISR before it stops.

        Polls until the meta service lets it exit (``may_exit``), it answers with an error
        (``error_code``, e.g. STALE_BROKER_EPOCH), or ``timeout_s`` passes: then the last answer
        (``may_exit`` False) is returned, or MetaError raised if no node answered at all. After
        ``may_exit`` the broker is fenced: stop heartbeating, exit, register on restart.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            request = meta_pb2.ControlledShutdownRequest(
                request_id=_request_id(), broker_id=node_id, broker_epoch=broker_epoch
            )
            response = await self._call(
                "ControlledShutdown", request, timeout_s=max(0.0, deadline - loop.time())
            )
            result = ControlledShutdownResult(
                response.may_exit,
                response.leaderships_left,
                response.error_code,
                response.error_message,
            )
            if result.may_exit or result.error_code or loop.time() + poll_interval_s > deadline:
                return result
            log.info(
                "Controlled shutdown of broker %d: %d leadership(s) left; asking again",
                node_id,
                result.leaderships_left,
            )
            await asyncio.sleep(poll_interval_s)

    async def allocate_producer_ids(self, node_id: int, broker_epoch: int) -> ProducerIdBlock:
        """A new block of producer ids for the broker, never handed out before.

        Raises MetaRequestError (STALE_BROKER_EPOCH: register again first).
        """
        request = meta_pb2.AllocateProducerIdsRequest(
            request_id=_request_id(), broker_id=node_id, broker_epoch=broker_epoch
        )
        response = await self._call("AllocateProducerIds", request)
        if response.error_code:
            raise MetaRequestError(response.error_code, response.error_message)
        return ProducerIdBlock(response.producer_id_start, response.producer_id_len)

    # ------------------------------------------------------------ partitions

    async def alter_partition(
        self,
        node_id: int,
        broker_epoch: int,
        items: Iterable[meta_pb2.AlterPartitionItem],
        *,
        request_id: str = "",
    ) -> list[meta_pb2.IsrOutcome]:
        """Change the ISR of partitions the broker leads; one result per item, in order.

        Each result has an ``error_code`` (Kafka's; see proto/meta.proto) and, when it is 0, the
        partition after the change (``partition.isr``, ``partition.partition_epoch``, ...).
        Retries within the call reuse one request id; to retry after a MetaError without
        applying the change twice, pass the same ``request_id`` (any unique string) again.
        """
        request = meta_pb2.AlterPartitionRequest(
            request_id=request_id or _request_id(),
            broker_id=node_id,
            broker_epoch=broker_epoch,
            partitions=list(items),
        )
        return list((await self._call("AlterPartition", request)).results)

    async def elect_leaders(
        self,
        election_type: int = meta_pb2.ELECTION_TYPE_PREFERRED,
        topic_partitions: Mapping[str, Iterable[int]] | None = None,
    ) -> list[meta_pb2.ReplicaElectionResult]:
        """Kafka's ElectLeaders: ``election_type`` 0 preferred, 1 unclean (Kafka's values);
        ``topic_partitions`` None means every partition (then only those that needed an
        election are in the results). Results per topic; check each partition's error_code."""
        request = meta_pb2.ElectLeadersRequest(
            request_id=_request_id(),
            election_type=election_type,  # type: ignore[arg-type]
            all_partitions=topic_partitions is None,
            topic_partitions=[
                meta_pb2.ElectLeadersTopic(topic=topic, partitions=list(partitions))
                for topic, partitions in (topic_partitions or {}).items()
            ],
        )
        return list((await self._call("ElectLeaders", request)).replica_election_results)

    # ------------------------------------------------------------ topics

    async def create_topics(
        self, topics: Iterable[meta_pb2.CreatableTopic], validate_only: bool = False
    ) -> list[meta_pb2.CreateTopicResult]:
        """One result per topic, in order; check each ``error_code`` (Kafka error codes)."""
        request = meta_pb2.CreateTopicsRequest(
            request_id=_request_id(), topics=list(topics), validate_only=validate_only
        )
        return list((await self._call("CreateTopics", request)).results)

    async def delete_topics(
        self, names: Iterable[str] = (), topic_ids: Iterable[bytes] = ()
    ) -> list[meta_pb2.DeleteTopicResult]:
        """One result per name, then per id, in order; check each ``error_code``."""
        request = meta_pb2.DeleteTopicsRequest(
            request_id=_request_id(), names=list(names), topic_ids=list(topic_ids)
        )
        return list((await self._call("DeleteTopics", request)).results)

    # ------------------------------------------------------------ cluster administration

    async def alter_configs(
        self, alterations: Sequence[ConfigAlteration], validate_only: bool = False
    ) -> list[tuple[int, str]]:
        """Kafka's AlterConfigs / IncrementalAlterConfigs of TOPIC and BROKER resources, values
        already validated: (error code, message) per alteration, in order. Errors:
        UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a broker name that is no id),
        BROKER_ID_NOT_REGISTERED. Every broker's cache has the change within a watch round trip
        (``TopicInfo.configs``; ``broker_configs`` and ``config_listeners``)."""
        request = meta_pb2.AlterConfigsRequest(
            request_id=_request_id(),
            alterations=[entity_proto.config_alteration_to_proto(a) for a in alterations],
            validate_only=validate_only,
        )
        response = await self._call("AlterConfigs", request)
        return [(r.error_code, r.error_message) for r in response.results]

    async def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
    ) -> list[tuple[int, str]]:
        """Kafka's AlterClientQuotas, validated by the meta service as Kafka's controller does:
        (error code, message) per alteration, in order (INVALID_REQUEST with Kafka's message).
        Brokers see the quotas in ``MetadataCache.client_quotas`` within a watch round trip."""
        request = meta_pb2.AlterClientQuotasRequest(
            request_id=_request_id(),
            alterations=alterations_to_proto(alterations),
            validate_only=validate_only,
        )
        response = await self._call("AlterClientQuotas", request)
        return [(r.error_code, r.error_message) for r in response.results]

    async def alter_resource_configs(
        self, alterations: Sequence[ResourceConfigAlteration], validate_only: bool = False
    ) -> list[tuple[int, str]]:
        """IncrementalAlterConfigs / AlterConfigs of GROUP and CLIENT_METRICS resources (a
        ``replace`` with nothing set removes a resource's configs), values already validated:
        (error code, message) per alteration, in order (INVALID_REQUEST: an empty name or an
        unsupported type). Brokers see them in ``MetadataCache.resource_configs``."""
        request = meta_pb2.AlterResourceConfigsRequest(
            request_id=_request_id(),
            alterations=[resource_configs.alteration_to_proto(a) for a in alterations],
            validate_only=validate_only,
        )
        response = await self._call("AlterResourceConfigs", request)
        return [(r.error_code, r.error_message) for r in response.results]

    async def create_partitions(
        self,
        topic: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> tuple[int, str]:
        """Kafka's CreatePartitions of one topic: grow it to ``count`` partitions, placed by
        ``assignments`` (one replica list per new partition) or like a new topic's. (error code,
        message): UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
        INVALID_REPLICA_ASSIGNMENT."""
        request = meta_pb2.CreatePartitionsRequest(
            request_id=_request_id(),
            topic=topic,
            count=count,
            manual=assignments is not None,
            assignments=entity_proto.assignments_to_proto(enumerate(assignments or ())),
            validate_only=validate_only,
        )
        response = await self._call("CreatePartitions", request)
        return response.error_code, response.error_message

    async def alter_partition_reassignments(
        self,
        changes: Sequence[tuple[str, int, Sequence[int] | None]],
        keep_replication_factor: bool = False,
    ) -> list[tuple[int, str]]:
        """Kafka's AlterPartitionReassignments: per (topic, partition, target replicas or None
        to cancel), in order, (error code, message): UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, and with
        `keep_replication_factor` INVALID_REPLICATION_FACTOR for a target of another size."""
        request = meta_pb2.AlterPartitionReassignmentsRequest(
            request_id=_request_id(),
            keep_replication_factor=keep_replication_factor,
            reassignments=[entity_proto.reassignment_to_proto(c) for c in changes],
        )
        response = await self._call("AlterPartitionReassignments", request)
        return [(r.error_code, r.error_message) for r in response.results]

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> list[ReassignmentInfo]:
        """The given partitions (None: all) being reassigned; others and unknown ones are left
        out, as Kafka's ListPartitionReassignments does."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        request = meta_pb2.ListPartitionReassignmentsRequest(
            all_partitions=partitions is None,
            partitions=[
                meta_pb2.TopicPartitionList(topic=topic, partitions=indexes)
                for topic, indexes in by_topic.items()
            ],
        )
        response = await self._call("ListPartitionReassignments", request)
        return [wire.ongoing_reassignment_from_proto(r) for r in response.reassignments]

    async def update_features(
        self, updates: Sequence[tuple[str, int, int]], validate_only: bool = False
    ) -> list[tuple[str, int, str]]:
        """Kafka's UpdateFeatures: (feature, max version level (0 removes it), upgrade type: 1
        upgrade, 2 safe downgrade, 3 unsafe downgrade) each; all or none are applied. Per
        update, in order, (feature, error code, message): INVALID_UPDATE_VERSION."""
        request = meta_pb2.UpdateFeaturesRequest(
            request_id=_request_id(),
            updates=[entity_proto.feature_update_to_proto(u) for u in updates],
            validate_only=validate_only,
        )
        response = await self._call("UpdateFeatures", request)
        return [(r.feature, r.error_code, r.error_message) for r in response.results]

    async def offline_replicas(
        self, broker_id: int, broker_epoch: int, partitions: Sequence[tuple[str, int]]
    ) -> int:
        """Report the broker's replicas (topic, partition) of a failed log dir: it leaves their
        ISRs (unless it is the last member) and their leaderships move to other in-sync
        replicas. Returns how many partitions changed; raises MetaRequestError
        (STALE_BROKER_EPOCH: register again first)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = meta_pb2.OfflineReplicasRequest(
            request_id=_request_id(),
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            partitions=[
                meta_pb2.TopicPartitionList(topic=topic, partitions=indexes)
                for topic, indexes in by_topic.items()
            ],
        )
        response: meta_pb2.OfflineReplicasResponse = await self._call("OfflineReplicas", request)
        if response.error_code:
            raise MetaRequestError(response.error_code, response.error_message)
        return response.partitions_changed

    async def unregister_broker(self, broker_id: int) -> tuple[int, str]:
        """Kafka's UnregisterBroker: (error code, message), BROKER_ID_NOT_REGISTERED for an id
        no broker has. Every broker's cache drops the broker within a watch round trip."""
        request = meta_pb2.UnregisterBrokerRequest(request_id=_request_id(), broker_id=broker_id)
        response = await self._call("UnregisterBroker", request)
        return response.error_code, response.error_message

    # ------------------------------------------------------------ consumer groups

    async def register_groups(self, groups: Iterable[tuple[str, int]]) -> int:
        """Record groups (group id, coordinator partition) in the registry; idempotent.
        Returns how many were new."""
        request = meta_pb2.RegisterGroupsRequest(
            request_id=_request_id(),
            groups=entity_proto.groups_to_proto(groups),
        )
        response: meta_pb2.RegisterGroupsResponse = await self._call("RegisterGroups", request)
        return response.registered

    async def unregister_groups(self, group_ids: Iterable[str]) -> int:
        """Remove groups from the registry; idempotent. Returns how many were registered."""
        request = meta_pb2.UnregisterGroupsRequest(
            request_id=_request_id(), group_ids=list(group_ids)
        )
        response: meta_pb2.UnregisterGroupsResponse = await self._call("UnregisterGroups", request)
        return response.unregistered

    async def list_groups(self, partitions: Iterable[int] = ()) -> list[tuple[str, int]]:
        """The registered groups (group id, coordinator partition), sorted by id; only those
        of the given __consumer_offsets partitions when some are given."""
        request = meta_pb2.ListGroupsRequest(coordinator_partitions=list(partitions))
        response = await self._call("ListGroups", request)
        return list(entity_proto.groups_from_proto(response.groups))

    # ------------------------------------------------------------ security

    async def create_acls(self, bindings: Iterable[AclBinding]) -> list[tuple[int, str]]:
        """Kafka's CreateAcls: (error code, message) per binding, in order; a binding already
        stored succeeds. Every broker's cache has the new ones within a watch round trip."""
        request = meta_pb2.CreateAclsRequest(
            request_id=_request_id(), bindings=[entity_proto.acl_to_proto(b) for b in bindings]
        )
        response = await self._call("CreateAcls", request)
        return [(r.error_code, r.error_message) for r in response.results]

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter]
    ) -> list[tuple[int, str, list[AclBinding]]]:
        """Kafka's DeleteAcls: per filter, in order, (error code, message, the bindings it
        matched and that are now removed)."""
        request = meta_pb2.DeleteAclsRequest(
            request_id=_request_id(), filters=[entity_proto.acl_filter_to_proto(f) for f in filters]
        )
        response = await self._call("DeleteAcls", request)
        outcomes = map(entity_proto.acl_delete_outcome_from_proto, response.results)
        return [(o.error_code, o.error_message, list(o.deleted)) for o in outcomes]

    async def alter_scram_credentials(
        self,
        upserts: Iterable[tuple[str, str, ScramCredential]],
        deletions: Iterable[tuple[str, str]],
    ) -> list[tuple[str, int, str]]:
        """Kafka's AlterUserScramCredentials with the keys already derived: upserts (user,
        mechanism, credential), deletions (user, mechanism); per user (user, error code,
        message). A user's alterations are applied together or not at all."""
        request = meta_pb2.AlterScramCredentialsRequest(
            request_id=_request_id(),
            upserts=[entity_proto.scram_to_proto(u, m, c) for u, m, c in upserts],
            deletions=[meta_pb2.ScramCredentialDeleted(user=u, mechanism=m) for u, m in deletions],
        )
        response = await self._call("AlterScramCredentials", request)
        return [(r.user, r.error_code, r.error_message) for r in response.results]

    async def create_delegation_token(self, token: DelegationToken) -> tuple[int, str]:
        """Store a token the broker made (id, HMAC, times); (error code, message)."""
        request = meta_pb2.CreateDelegationTokenRequest(
            request_id=_request_id(), token=entity_proto.token_to_proto(token)
        )
        response = await self._call("CreateDelegationToken", request)
        return response.error_code, response.error_message

    async def renew_delegation_token(
        self, hmac: bytes, principal: str, renew_period_ms: int, now_ms: int
    ) -> tuple[int, str, int]:
        """Kafka's RenewDelegationToken by ``principal``: (error code, message, new expiry ms).
        DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_OWNER_MISMATCH, DELEGATION_TOKEN_EXPIRED."""
        request = meta_pb2.RenewDelegationTokenRequest(
            request_id=_request_id(),
            hmac=hmac,
            principal=principal,
            renew_period_ms=renew_period_ms,
            now_ms=now_ms,
        )
        response = await self._call("RenewDelegationToken", request)
        return response.error_code, response.error_message, response.expiry_ms

    async def expire_delegation_token(
        self, hmac: bytes, principal: str, expiry_period_ms: int, now_ms: int
    ) -> tuple[int, str, int]:
        """Kafka's ExpireDelegationToken (a negative period removes the token now): (error
        code, message, expiry ms), with the errors of ``renew_delegation_token``."""
        request = meta_pb2.ExpireDelegationTokenRequest(
            request_id=_request_id(),
            hmac=hmac,
            principal=principal,
            expiry_period_ms=expiry_period_ms,
            now_ms=now_ms,
        )
        response = await self._call("ExpireDelegationToken", request)
        return response.error_code, response.error_message, response.expiry_ms

    # ------------------------------------------------------------ watch and tooling

    async def watch(self, from_offset: int = 0) -> AsyncIterator[meta_pb2.WatchEvent]:
        """Every metadata change after ``from_offset`` (0: a snapshot first), forever.

        When its node goes away it reconnects to another and resumes after the last offset it
        delivered; the node may then start with a snapshot if it no longer buffers that far back.
        """
        offset = from_offset
        failures = 0
        while True:
            address = self._addresses[self._current]
            call = self._stub(address).Watch(meta_pb2.WatchRequest(from_offset=offset))
            try:
                async for event in call:
                    failures = 0
                    offset = event.offset
                    yield event
                log.info("Watch stream from %s ended; resuming after offset %d", address, offset)
            except aio.AioRpcError as exc:
                if exc.code() not in _RETRIABLE:
                    raise MetaError(f"Watch on {address} failed: {exc.details()}") from exc
                log.log(
                    logging.INFO if failures == 0 else logging.DEBUG,  # once per outage
                    "Watch stream from %s lost (%s); resuming after offset %d elsewhere",
                    address,
                    exc.code().name,
                    offset,
                )
            finally:
                call.cancel()
            self._current = (self._current + 1) % len(self._addresses)
            failures += 1
            await asyncio.sleep(_backoff(failures))

    async def hold_session(self, node_id: int, broker_epoch: Callable[[], int]) -> None:
        """Keep a session open with the Raft leader until cancelled (see Session in
        proto/meta.proto): if this process dies, the leader fences the broker at once.
        Reconnects after any loss, with the broker's epoch at that moment."""
        failures = 0
        while True:
            address = self._addresses[self._current]
            request = meta_pb2.SessionRequest(broker_id=node_id, broker_epoch=broker_epoch())
            call = self._stub(address).Session(request)
            try:
                async for _ in call:
                    failures = 0
            except aio.AioRpcError as exc:
                leader = _leader_redirect(exc)
                if leader is not None:
                    self._use(leader)
                    continue
                if exc.code() not in _RETRIABLE:
                    raise MetaError(f"Session on {address} failed: {exc.details()}") from exc
                self._current = (self._current + 1) % len(self._addresses)
            finally:
                call.cancel()
            failures += 1
            await asyncio.sleep(_backoff(failures))

    async def describe_cluster(self) -> meta_pb2.DescribeClusterResponse:
        response: meta_pb2.DescribeClusterResponse = await self._call(
            "DescribeCluster", meta_pb2.DescribeClusterRequest()
        )
        return response

    # ------------------------------------------------------------ the meta quorum

    async def describe_quorum(
        self, timeout_s: float | None = None
    ) -> meta_pb2.DescribeQuorumResponse:
        """The Raft leader's view of the quorum (DescribeQuorum, KIP-853)."""
        response: meta_pb2.DescribeQuorumResponse = await self._call(
            "DescribeQuorum", meta_pb2.DescribeQuorumRequest(), timeout_s
        )
        return response

    async def add_voter(self, request: meta_pb2.AddVoterRequest) -> tuple[int, str]:
        """Add a meta node to the voters once it has caught up: (Kafka error code, message)."""
        timeout_s = max(self._timeout_s, request.timeout_ms / 1000 + 5)
        response = await self._call("AddVoter", request, timeout_s)
        return response.error_code, response.error_message

    async def remove_voter(self, voter_id: int, directory_id: str) -> tuple[int, str]:
        """Remove a voter (id and directory id): (Kafka error code, message)."""
        request = meta_pb2.RemoveVoterRequest(voter_id=voter_id, directory_id=directory_id)
        response = await self._call("RemoveVoter", request)
        return response.error_code, response.error_message

    async def unregister_controller(self, controller_id: int) -> tuple[int, str]:
        """Kafka's UnregisterController (KIP-1312) of a meta node: (Kafka error code, message)."""
        request = meta_pb2.UnregisterControllerRequest(controller_id=controller_id)
        response = await self._call("UnregisterController", request)
        return response.error_code, response.error_message

    async def report_observer(self, request: meta_pb2.ReportObserverRequest) -> None:
        """Tell the Raft leader where this observing meta node is (meta.quorum_service)."""
        await self._call("ReportObserver", request)

    # ------------------------------------------------------------ plumbing

    def _stub(self, address: str) -> meta_pb2_grpc.MetaServiceStub:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = self._security.channel(address, _CHANNEL_OPTIONS)
        return meta_pb2_grpc.MetaServiceStub(channel)

    async def _call(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        # Any: the stub's RPC is looked up by name, so its request and response types are the
        # caller's to name (callers annotate the response they read)
        loop = asyncio.get_running_loop()
        timeout_s = self._timeout_s if timeout_s is None else timeout_s
        deadline = loop.time() + timeout_s
        failures = 0
        reason = ""  # the most telling failure so far, for the final error
        while True:
            address = self._addresses[self._current]
            remaining = deadline - loop.time()
            try:
                call = getattr(self._stub(address), method)
                return await rpc(call(request, timeout=min(self._attempt_timeout_s, remaining)))
            except aio.AioRpcError as exc:
                leader = _leader_redirect(exc)
                if leader is not None:
                    self._use(leader)
                elif exc.code() in _RETRIABLE:
                    self._current = (self._current + 1) % len(self._addresses)
                else:
                    raise MetaError(f"{method} on {address} failed: {exc.details()}") from exc
                if not reason or exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    reason = f"{exc.code().name} from {address}: {exc.details()}"
                failures += 1
                pause = 0.0 if leader is not None and failures < 3 else _backoff(failures)
                if loop.time() + pause >= deadline:
                    raise MetaError(
                        f"{method} failed on every meta node for {timeout_s:g}s; "
                        f"last reason: {reason}"
                    ) from exc
                log.debug("%s on %s failed (%s); retrying", method, address, exc.code().name)
                await asyncio.sleep(pause)

    def _use(self, address: str) -> None:
        if address not in self._addresses:
            self._addresses.append(address)
        self._current = self._addresses.index(address)


def _leader_redirect(exc: aio.AioRpcError) -> str | None:
    if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    for key, value in exc.trailing_metadata() or ():
        if key == LEADER_METADATA_KEY:
            return str(value)
    return None


def _backoff(failures: int) -> float:
    return min(_MAX_BACKOFF_S, _FIRST_BACKOFF_S * 2.0 ** (failures - 1))


def _request_id() -> str:
    return uuid.uuid4().hex
