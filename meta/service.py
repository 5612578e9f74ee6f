"""The meta gRPC API of one node (``proto/meta.proto``) and the periodic duties of the leader.

Reads (Watch, DescribeCluster, validate-only creates) are served from this node's applied state.
Writes become Raft commands that any node accepts (see ``meta.raft``). Heartbeats need the
broker leases, which only the Raft leader keeps, so other nodes point the caller to the leader.
The leader also proposes, on its own, the fencing of brokers whose lease ran out, the removal
of expired delegation tokens and (with auto.leader.rebalance.enable) the return of leaderships
to preferred replicas.
"""

from __future__ import annotations

import base64
import logging
import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, NoReturn

import grpc

from meta import entity_proto, partition_leadership, quotas, resource_configs, topic_planning, wire
from meta.cluster_admin import list_reassignments
from meta.commands import (
    AclDeleteOutcome,
    AllocateProducerIds,
    AlterConfigs,
    AlterPartition,
    AlterReassignments,
    AlterScramCredentials,
    BalanceLeaders,
    Body,
    ControlledShutdown,
    CreateAcls,
    CreateDelegationToken,
    CreatePartitions,
    CreateTopics,
    DeleteAcls,
    DeleteTopics,
    ExpireDelegationToken,
    FeatureOutcome,
    FenceBroker,
    InitCluster,
    OfflineOutcome,
    OfflineReplicas,
    Outcome,
    ProducerIdBlock,
    RegisterBroker,
    RegisterGroups,
    RemoveExpiredTokens,
    RenewDelegationToken,
    ScramOutcome,
    ShutdownOutcome,
    TokenOutcome,
    UnfenceBroker,
    UnregisterBroker,
    UnregisterGroups,
    UpdateFeatures,
)
from meta.config import MetaConfig
from meta.feed import ChangeFeed
from meta.leases import BrokerLeases
from meta.protocol import LEADER_METADATA_KEY, ErrorCode
from meta.quorum import Member, Refusal
from meta.quorum_service import LeadershipMoved, QuorumAdmin
from meta.raft import MetaRaft, NoLeaderError
from proto import meta_pb2, meta_pb2_grpc

log = logging.getLogger("rafka.meta.service")

_LEADER_DUTY_PERIOD_S = 0.1
_WATCH_WAKEUP_S = 0.5  # how often an idle Watch re-checks that its client is still there


def new_cluster_id() -> str:
    """A cluster id in Kafka's format: a random UUID, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class MetaService(meta_pb2_grpc.MetaServiceServicer):
    """The RPC handlers (on gRPC worker threads) plus a thread for the leader's duties."""

    def __init__(
        self, config: MetaConfig, raft: MetaRaft, feed: ChangeFeed, leases: BrokerLeases
    ) -> None:
        self._node_id = config.node_id
        self._quorum = QuorumAdmin(raft, config.node_id, config.meta_write_timeout_ms / 1000)
        self._unclean_default = config.unclean_leader_election_enable
        self._auto_rebalance = config.auto_leader_rebalance_enable
        self._imbalance_check_s = config.leader_imbalance_check_interval_seconds
        # finalized feature levels a new cluster starts with
        self._bootstrap_features = (
            ("group.version", config.group_version),
            ("streams.version", config.streams_version),
            ("transaction.version", config.transaction_version),
        )
        self._next_imbalance_check = time.monotonic() + self._imbalance_check_s
        self._raft = raft
        self._machine = raft.machine
        self._feed = feed
        self._leases = leases
        self._stopping = threading.Event()
        self._duties = threading.Thread(
            target=self._run_leader_duties, name="meta-leader-duties", daemon=True
        )

    def start(self) -> None:
        self._duties.start()

    def stop(self) -> None:
        """Stop the leader duties and end every Watch stream."""
        self._stopping.set()
        self._feed.close()
        self._duties.join()

    # ------------------------------------------------------------ brokers

    def RegisterBroker(
        self, request: meta_pb2.RegisterBrokerRequest, context: grpc.ServicerContext
    ) -> meta_pb2.RegisterBrokerResponse:
        if request.broker_id < 0 or not request.host or not 0 < request.port < 65536:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "broker id, host or port invalid")
        if not request.incarnation_id:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "incarnation_id is required")
        endpoints = tuple(entity_proto.endpoint_from_proto(e) for e in request.endpoints)
        if any(not e.name or not e.host or not 0 < e.port < 65536 for e in endpoints):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "endpoint name, host or port invalid")
        if len({e.name for e in endpoints}) < len(endpoints):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "endpoint names must be unique")
        command = RegisterBroker(
            request.broker_id,
            request.host,
            request.port,
            request.rack or None,
            request.replication_endpoint,
            request.incarnation_id,
            self._unclean_default,
            endpoints,
        )
        epoch = self._write(context, command, request.request_id)
        return meta_pb2.RegisterBrokerResponse(broker_epoch=epoch)

    def Heartbeat(
        self, request: meta_pb2.HeartbeatRequest, context: grpc.ServicerContext
    ) -> meta_pb2.HeartbeatResponse:
        self._require_leader(context)
        with self._machine.lock:
            broker = self._machine.state.brokers.get(request.broker_id)
        if broker is None:
            return meta_pb2.HeartbeatResponse(
                error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker {request.broker_id} is not registered; register it.",
                fenced=True,
            )
        if request.broker_epoch < broker.epoch:
            return meta_pb2.HeartbeatResponse(
                error_code=ErrorCode.STALE_BROKER_EPOCH,
                error_message=f"Broker epoch {request.broker_epoch} is stale (current is "
                f"{broker.epoch}); register the broker again.",
                fenced=True,
            )
        if request.broker_epoch > broker.epoch:
            _abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                "this node has not applied the broker's latest registration yet; retry",
            )
        self._leases.renew(broker.id, broker.epoch)
        if broker.fenced and not broker.in_controlled_shutdown:
            self._write(context, UnfenceBroker(broker.id, broker.epoch, self._unclean_default))
        with self._machine.lock:
            broker = self._machine.state.brokers.get(broker.id, broker)
            offset = self._machine.state.offset
        return meta_pb2.HeartbeatResponse(
            fenced=broker.fenced,
            # fenced at the end of a controlled shutdown: it leads nothing any more
            should_shut_down=broker.in_controlled_shutdown and broker.fenced,
            metadata_offset=offset,
        )

    def Session(
        self, request: meta_pb2.SessionRequest, context: grpc.ServicerContext
    ) -> Iterator[meta_pb2.SessionEvent]:
        self._require_leader(context)
        gone = threading.Event()
        context.add_callback(gone.set)  # the RPC ended: the client went away (or we returned)
        yield meta_pb2.SessionEvent()
        while not gone.wait(_WATCH_WAKEUP_S):
            if self._stopping.is_set() or not self._raft.is_leader():
                return  # the broker reconnects to the next leader
        self._fence_on_lost_session(request.broker_id, request.broker_epoch)

    def _fence_on_lost_session(self, broker_id: int, epoch: int) -> None:
        with self._machine.lock:
            broker = self._machine.state.brokers.get(broker_id)
        if broker is None or broker.fenced or broker.epoch != epoch or not self._raft.is_leader():
            return  # already fenced, re-registered since, or no longer ours to decide
        log.warning(
            "Broker %d's session closed (the process exited or lost its connection): fencing it "
            "now. Its partitions move to other in-sync replicas; it rejoins when it heartbeats or "
            "registers again.",
            broker_id,
        )
        try:
            self._raft.submit(FenceBroker(broker_id, epoch, self._unclean_default))
        except NoLeaderError as exc:
            log.warning(
                "Could not fence broker %d: %s; its lease will expire instead", broker_id, exc
            )

    def ControlledShutdown(
        self, request: meta_pb2.ControlledShutdownRequest, context: grpc.ServicerContext
    ) -> meta_pb2.ControlledShutdownResponse:
        command = ControlledShutdown(request.broker_id, request.broker_epoch, self._unclean_default)
        outcome: ShutdownOutcome = self._write(context, command, request.request_id)
        return meta_pb2.ControlledShutdownResponse(
            error_code=outcome.error_code,
            error_message=outcome.error_message,
            may_exit=outcome.may_exit,
            leaderships_left=outcome.leaderships_left,
        )

    def AllocateProducerIds(
        self, request: meta_pb2.AllocateProducerIdsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.AllocateProducerIdsResponse:
        command = AllocateProducerIds(request.broker_id, request.broker_epoch)
        block: ProducerIdBlock = self._write(context, command, request.request_id)
        return meta_pb2.AllocateProducerIdsResponse(
            error_code=block.error_code,
            error_message=block.error_message,
            producer_id_start=block.first,
            producer_id_len=block.count,
        )

    # ------------------------------------------------------------ topics

    def CreateTopics(
        self, request: meta_pb2.CreateTopicsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.CreateTopicsResponse:
        new_topics = tuple(
            wire.new_topic_from_proto(topic, uuid.uuid4().bytes, random.getrandbits(31))
            for topic in request.topics
        )
        if too_large := topic_planning.excessive_request(new_topics):
            outcomes: list = [too_large] * len(new_topics)  # refused without a Raft write
        elif request.validate_only:
            with self._machine.lock:
                state = self._machine.state
                outcomes = topic_planning.plan_topics(new_topics, state.topics, state.brokers)
        else:
            outcomes = self._write(context, CreateTopics(new_topics), request.request_id)
        first = outcomes[0] if outcomes else None
        if (
            isinstance(first, topic_planning.Rejection)
            and first.error_code == ErrorCode.POLICY_VIOLATION
        ):
            log.warning(
                "Refused a CreateTopics of %d topic(s), %d partition(s) in all: %s Kafka's "
                "controller writes at most %d records per request: create them in several "
                "requests",
                len(new_topics),
                topic_planning.requested_partitions(new_topics),
                first.message,
                topic_planning.MAX_RECORDS_PER_USER_OP,
            )
        results = [
            wire.create_result(topic.name, outcome)
            for topic, outcome in zip(new_topics, outcomes, strict=True)
        ]
        return meta_pb2.CreateTopicsResponse(results=results)

    def DeleteTopics(
        self, request: meta_pb2.DeleteTopicsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DeleteTopicsResponse:
        command = DeleteTopics(tuple(request.names), tuple(request.topic_ids))
        outcomes = self._write(context, command, request.request_id)
        return meta_pb2.DeleteTopicsResponse(results=[wire.delete_result(o) for o in outcomes])

    # ------------------------------------------------------------ partitions

    def AlterPartition(
        self, request: meta_pb2.AlterPartitionRequest, context: grpc.ServicerContext
    ) -> meta_pb2.AlterPartitionResponse:
        command = AlterPartition(
            request.broker_id,
            request.broker_epoch,
            tuple(wire.isr_change_from_proto(item) for item in request.partitions),
        )
        outcome = self._write(context, command, request.request_id)
        return wire.alter_partition_response(outcome)

    def ElectLeaders(
        self, request: meta_pb2.ElectLeadersRequest, context: grpc.ServicerContext
    ) -> meta_pb2.ElectLeadersResponse:
        if request.election_type not in meta_pb2.ElectionType.values():
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "unknown election type")
        command = wire.elect_leaders_from_proto(request)
        outcomes = self._write(context, command, request.request_id)
        return wire.elect_leaders_response(command, outcomes)

    # ------------------------------------------------------------ cluster administration

    def AlterConfigs(
        self, request: meta_pb2.AlterConfigsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.AlterConfigsResponse:
        try:
            alterations = tuple(
                entity_proto.config_alteration_from_proto(a) for a in request.alterations
            )
        except ValueError as exc:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        command = AlterConfigs(alterations, request.validate_only)
        outcomes: list[Outcome] = self._write(context, command, request.request_id)
        return meta_pb2.AlterConfigsResponse(results=[_item_result(o) for o in outcomes])

    def AlterClientQuotas(
        self, request: meta_pb2.AlterClientQuotasRequest, context: grpc.ServicerContext
    ) -> meta_pb2.AlterConfigsResponse:
        command = quotas.AlterClientQuotas(
            quotas.alterations_from_proto(request.alterations), request.validate_only
        )
        outcomes: list[quotas.QuotaOutcome] = self._write(context, command, request.request_id)
        return meta_pb2.AlterConfigsResponse(
            results=[
                meta_pb2.ItemResult(error_code=o.error_code, error_message=o.error_message)
                for o in outcomes
            ]
        )

    def AlterResourceConfigs(
        self, request: meta_pb2.AlterResourceConfigsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.AlterConfigsResponse:
        command = resource_configs.AlterResourceConfigs(
            tuple(resource_configs.alteration_from_proto(a) for a in request.alterations),
            request.validate_only,
        )
        outcomes: list[resource_configs.ResourceOutcome] = self._write(
            context, command, request.request_id
        )
        return meta_pb2.AlterConfigsResponse(
            results=[
                meta_pb2.ItemResult(error_code=o.error_code, error_message=o.error_message)
                for o in outcomes
            ]
        )

    def CreatePartitions(
        self, request: meta_pb2.CreatePartitionsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.CreatePartitionsResponse:
        assignments = None
        if request.manual:
            assignments = tuple(tuple(a.broker_ids) for a in request.assignments)
        command = CreatePartitions(
            request.topic,
            request.count,
            assignments,
            request.validate_only,
            random.getrandbits(31),
        )
        outcome: Outcome = self._write(context, command, request.request_id)
        return meta_pb2.CreatePartitionsResponse(
            error_code=outcome.error_code, error_message=outcome.error_message
        )

    def AlterPartitionReassignments(
        self,
        request: meta_pb2.AlterPartitionReassignmentsRequest,
        context: grpc.ServicerContext,
    ) -> meta_pb2.AlterPartitionReassignmentsResponse:
        command = AlterReassignments(
            tuple(entity_proto.reassignment_from_proto(r) for r in request.reassignments),
            self._unclean_default,
            request.keep_replication_factor,
        )
        outcomes: list[Outcome] = self._write(context, command, request.request_id)
        return meta_pb2.AlterPartitionReassignmentsResponse(
            results=[_item_result(o) for o in outcomes]
        )

    def ListPartitionReassignments(
        self,
        request: meta_pb2.ListPartitionReassignmentsRequest,
        context: grpc.ServicerContext,
    ) -> meta_pb2.ListPartitionReassignmentsResponse:
        self._require_leader(context)  # read what is committed, as Kafka's controller answers
        wanted = None
        if not request.all_partitions:
            wanted = tuple((t.topic, p) for t in request.partitions for p in t.partitions)
        with self._machine.lock:
            found = list_reassignments(self._machine.state, wanted)
        return meta_pb2.ListPartitionReassignmentsResponse(
            reassignments=[wire.ongoing_reassignment_to_proto(r) for r in found]
        )

    def UpdateFeatures(
        self, request: meta_pb2.UpdateFeaturesRequest, context: grpc.ServicerContext
    ) -> meta_pb2.UpdateFeaturesResponse:
        command = UpdateFeatures(
            tuple(entity_proto.feature_update_from_proto(u) for u in request.updates),
            request.validate_only,
        )
        outcomes: list[FeatureOutcome] = self._write(context, command, request.request_id)
        return meta_pb2.UpdateFeaturesResponse(
            results=[
                meta_pb2.FeatureResult(
                    feature=o.name, error_code=o.error_code, error_message=o.error_message
                )
                for o in outcomes
            ]
        )

    def OfflineReplicas(
        self, request: meta_pb2.OfflineReplicasRequest, context: grpc.ServicerContext
    ) -> meta_pb2.OfflineReplicasResponse:
        command = OfflineReplicas(
            request.broker_id,
            request.broker_epoch,
            tuple((t.topic, p) for t in request.partitions for p in t.partitions),
            self._unclean_default,
        )
        outcome: OfflineOutcome = self._write(context, command, request.request_id)
        return meta_pb2.OfflineReplicasResponse(
            error_code=outcome.error_code,
            error_message=outcome.error_message,
            partitions_changed=outcome.partitions_changed,
        )

    def UnregisterBroker(
        self, request: meta_pb2.UnregisterBrokerRequest, context: grpc.ServicerContext
    ) -> meta_pb2.ItemResult:
        command = UnregisterBroker(request.broker_id, self._unclean_default)
        outcome: Outcome = self._write(context, command, request.request_id)
        return _item_result(outcome)

    # ------------------------------------------------------------ consumer groups

    def RegisterGroups(
        self, request: meta_pb2.RegisterGroupsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.RegisterGroupsResponse:
        entries = entity_proto.groups_from_proto(request.groups)
        if any(not group_id for group_id, _ in entries):
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "a group id cannot be empty")
        added = self._write(context, RegisterGroups(entries), request.request_id)
        return meta_pb2.RegisterGroupsResponse(registered=added)

    def UnregisterGroups(
        self, request: meta_pb2.UnregisterGroupsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.UnregisterGroupsResponse:
        command = UnregisterGroups(tuple(request.group_ids))
        removed = self._write(context, command, request.request_id)
        return meta_pb2.UnregisterGroupsResponse(unregistered=removed)

    def ListGroups(
        self, request: meta_pb2.ListGroupsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.ListGroupsResponse:
        self._require_leader(context)  # a group registered a moment ago is listed
        wanted = set(request.coordinator_partitions)
        with self._machine.lock:
            entries = sorted(self._machine.state.groups.items())
        return meta_pb2.ListGroupsResponse(
            groups=entity_proto.groups_to_proto(
                (group_id, partition)
                for group_id, partition in entries
                if not wanted or partition in wanted
            )
        )

    # ------------------------------------------------------------ security

    def CreateAcls(
        self, request: meta_pb2.CreateAclsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.CreateAclsResponse:
        command = CreateAcls(tuple(entity_proto.acl_from_proto(b) for b in request.bindings))
        outcomes: list[Outcome] = self._write(context, command, request.request_id)
        return meta_pb2.CreateAclsResponse(results=[_item_result(o) for o in outcomes])

    def DeleteAcls(
        self, request: meta_pb2.DeleteAclsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DeleteAclsResponse:
        command = DeleteAcls(tuple(entity_proto.acl_filter_from_proto(f) for f in request.filters))
        outcomes: list[AclDeleteOutcome] = self._write(context, command, request.request_id)
        return meta_pb2.DeleteAclsResponse(
            results=[entity_proto.acl_delete_outcome_to_proto(o) for o in outcomes]
        )

    def AlterScramCredentials(
        self, request: meta_pb2.AlterScramCredentialsRequest, context: grpc.ServicerContext
    ) -> meta_pb2.AlterScramCredentialsResponse:
        command = AlterScramCredentials(
            tuple((c.user, c.mechanism, entity_proto.scram_from_proto(c)) for c in request.upserts),
            tuple((d.user, d.mechanism) for d in request.deletions),
        )
        outcomes: list[ScramOutcome] = self._write(context, command, request.request_id)
        return meta_pb2.AlterScramCredentialsResponse(
            results=[
                meta_pb2.ScramCredentialResult(
                    user=o.user, error_code=o.error_code, error_message=o.error_message
                )
                for o in outcomes
            ]
        )

    def CreateDelegationToken(
        self, request: meta_pb2.CreateDelegationTokenRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DelegationTokenResponse:
        token = entity_proto.token_from_proto(request.token)
        if not token.token_id or not token.hmac or ":" not in token.owner:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "token id, hmac or owner invalid")
        command = CreateDelegationToken(token)
        return _token_response(self._write(context, command, request.request_id))

    def RenewDelegationToken(
        self, request: meta_pb2.RenewDelegationTokenRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DelegationTokenResponse:
        command = RenewDelegationToken(
            request.hmac, request.principal, request.renew_period_ms, request.now_ms
        )
        return _token_response(self._write(context, command, request.request_id))

    def ExpireDelegationToken(
        self, request: meta_pb2.ExpireDelegationTokenRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DelegationTokenResponse:
        command = ExpireDelegationToken(
            request.hmac, request.principal, request.expiry_period_ms, request.now_ms
        )
        return _token_response(self._write(context, command, request.request_id))

    # ------------------------------------------------------------ watch and tooling

    def Watch(
        self, request: meta_pb2.WatchRequest, context: grpc.ServicerContext
    ) -> Iterator[meta_pb2.WatchEvent]:
        context.add_callback(self._feed.wake)  # a cancelled stream stops waiting at once
        offset = request.from_offset
        need_snapshot = offset <= 0
        while context.is_active() and not self._feed.closed:
            if need_snapshot:
                with self._machine.lock:
                    state = self._machine.state
                    snapshot = wire.snapshot_event(state) if state.cluster_id else None
                    current = state.offset
                if snapshot is None:  # no cluster id before the first leader initialises it
                    self._feed.wait(current, _WATCH_WAKEUP_S)
                    continue
                yield snapshot
                offset, need_snapshot = snapshot.offset, False
            events = self._feed.since(offset)
            if events is None:  # fell out of the buffer
                need_snapshot = True
            elif events:
                yield from events
                offset = events[-1].offset
            else:
                self._feed.wait(offset, _WATCH_WAKEUP_S)

    def DescribeCluster(
        self, request: meta_pb2.DescribeClusterRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DescribeClusterResponse:
        with self._machine.lock:
            cluster_id, offset = self._machine.state.cluster_id, self._machine.state.offset
        leader = self._leader_id()
        nodes = [
            meta_pb2.MetaNode(
                node_id=member.node_id,
                raft_address=member.raft_address,
                grpc_address=member.grpc_address,
                role=meta_pb2.ROLE_LEADER if member.node_id == leader else meta_pb2.ROLE_FOLLOWER,
            )
            for member in self._raft.members()
        ]
        return meta_pb2.DescribeClusterResponse(
            cluster_id=cluster_id,
            node_id=self._node_id,
            leader_id=leader,
            metadata_offset=offset,
            nodes=nodes,
        )

    # ------------------------------------------------------------ the meta quorum

    def DescribeQuorum(
        self, request: meta_pb2.DescribeQuorumRequest, context: grpc.ServicerContext
    ) -> meta_pb2.DescribeQuorumResponse:
        self._require_leader(context)
        with self._machine.lock:
            cluster_id = self._machine.state.cluster_id
        return self._quorum.describe(cluster_id)

    def AddVoter(
        self, request: meta_pb2.AddVoterRequest, context: grpc.ServicerContext
    ) -> meta_pb2.VoterChangeResponse:
        self._require_leader(context)
        return _voter_change(self._quorum.add(request))

    def RemoveVoter(
        self, request: meta_pb2.RemoveVoterRequest, context: grpc.ServicerContext
    ) -> meta_pb2.VoterChangeResponse:
        self._require_leader(context)
        try:
            refusal = self._quorum.remove(request)
        except LeadershipMoved as exc:
            self._require_leader(context)  # sends the caller to the new leader
            _abort(context, grpc.StatusCode.UNAVAILABLE, f"{exc}; retry")
        return _voter_change(refusal)

    def ReportObserver(
        self, request: meta_pb2.ReportObserverRequest, context: grpc.ServicerContext
    ) -> meta_pb2.ReportObserverResponse:
        self._require_leader(context)
        self._quorum.report(request)
        return meta_pb2.ReportObserverResponse()

    def UnregisterController(
        self, request: meta_pb2.UnregisterControllerRequest, context: grpc.ServicerContext
    ) -> meta_pb2.VoterChangeResponse:
        self._require_leader(context)
        return _voter_change(self._quorum.unregister(request.controller_id))

    # ------------------------------------------------------------ leader duties

    def _run_leader_duties(self) -> None:
        while not self._stopping.wait(_LEADER_DUTY_PERIOD_S):
            if not self._raft.is_leader():
                continue
            try:
                self._initialise_cluster()
                self._fence_expired_brokers()
                self._remove_expired_tokens()
                self._balance_leaders()
            except NoLeaderError as exc:
                log.warning("Leader duties postponed: %s", exc)
            except Exception:
                log.exception("Leader duties failed; retrying")

    def _initialise_cluster(self) -> None:
        """Give the cluster its id and bootstrap feature levels (also to a cluster initialised
        before finalized features existed)."""
        with self._machine.lock:
            state = self._machine.state
            if state.cluster_id and state.features_initialized:
                return
            cluster_id = state.cluster_id or new_cluster_id()
        # A leader still replaying its log may propose this again: only the first one counts.
        self._raft.submit(InitCluster(cluster_id, self._bootstrap_features))

    def _fence_expired_brokers(self) -> None:
        with self._machine.lock:
            brokers = self._machine.state.brokers.values()
            unfenced = {broker.id: broker.epoch for broker in brokers if not broker.fenced}
        for broker_id, epoch in self._leases.expired(unfenced):
            log.warning(
                "Broker %d sent no heartbeat within broker.session.timeout.ms: fencing it. Its "
                "partitions move to other in-sync replicas, or go offline until it registers "
                "again; check that the broker is running and can reach the meta nodes.",
                broker_id,
            )
            self._raft.submit(FenceBroker(broker_id, epoch, self._unclean_default))

    def _remove_expired_tokens(self) -> None:
        """Kafka's expired-token sweep: tokens past their expiry go from the state, so no
        broker accepts them any more (brokers also check the expiry on authentication)."""
        now_ms = int(time.time() * 1000)
        with self._machine.lock:
            tokens = self._machine.state.delegation_tokens.values()
            expired = any(min(t.expiry_ms, t.max_ms) < now_ms for t in tokens)
        if expired:
            self._raft.submit(RemoveExpiredTokens(now_ms))

    def _balance_leaders(self) -> None:
        """Kafka's auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds,
        move leaderships back to preferred replicas, if some can move (no empty writes)."""
        if not self._auto_rebalance or time.monotonic() < self._next_imbalance_check:
            return
        with self._machine.lock:
            state = self._machine.state
            active = partition_leadership.active_brokers(state.brokers)
            imbalanced = any(
                partition_leadership.elect_preferred(partition, active) is not None
                for topic in state.topics.values()
                for partition in topic.partitions
            )
        if imbalanced:
            self._raft.submit(BalanceLeaders())
        self._next_imbalance_check = time.monotonic() + self._imbalance_check_s

    # ------------------------------------------------------------ helpers

    def _write(self, context: grpc.ServicerContext, body: Body, request_id: str = "") -> Any:
        try:
            return self._raft.submit(body, request_id)
        except NoLeaderError as exc:
            _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))

    def _leader(self) -> Member | None:
        address = self._raft.leader_address()
        return next((m for m in self._raft.members() if m.raft_address == address), None)

    def _leader_id(self) -> int:
        leader = self._leader()
        return -1 if leader is None else leader.node_id

    def _require_leader(self, context: grpc.ServicerContext) -> None:
        """Send the caller to the Raft leader (FAILED_PRECONDITION naming it, which MetaClient
        follows): for leases, and for admin reads that must see every acknowledged write (a
        follower may not have applied the latest ones yet)."""
        if self._raft.is_leader():
            return
        leader = self._leader()
        if leader is None or not leader.grpc_address:
            _abort(context, grpc.StatusCode.UNAVAILABLE, "no Raft leader right now; retry")
        address = leader.grpc_address
        context.set_trailing_metadata(((LEADER_METADATA_KEY, address),))
        _abort(
            context,
            grpc.StatusCode.FAILED_PRECONDITION,
            f"meta node {self._node_id} is not the Raft leader; node {leader.node_id} at "
            f"{address} is",
        )


def _voter_change(refusal: Refusal | None) -> meta_pb2.VoterChangeResponse:
    if refusal is None:
        return meta_pb2.VoterChangeResponse()
    return meta_pb2.VoterChangeResponse(
        error_code=refusal.error_code, error_message=refusal.message
    )


def _item_result(outcome: Outcome) -> meta_pb2.ItemResult:
    return meta_pb2.ItemResult(error_code=outcome.error_code, error_message=outcome.error_message)


def _token_response(outcome: TokenOutcome) -> meta_pb2.DelegationTokenResponse:
    return meta_pb2.DelegationTokenResponse(
        error_code=outcome.error_code,
        error_message=outcome.error_message,
        expiry_ms=outcome.expiry_ms,
    )


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("unreachable: context.abort raises")
