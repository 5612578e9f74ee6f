"""Raw Kafka-protocol load for the scale bench, over cluster/kafka_client.py's blocking
connection: thousands of idle connections, hundreds of one-member groups and a consumer's
fetches with and without a fetch session (KIP-227) cost a client process little this way,
where as many librdkafka instances would take the machine from the broker being measured."""

from __future__ import annotations

import statistics
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as Assignment,
)
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedPartition
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as Subscription,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from cluster.kafka_client import KafkaConnection, builder, encode

FETCH, METADATA, OFFSET_COMMIT, FIND_COORDINATOR = 1, 3, 8, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, API_VERSIONS = 11, 12, 13, 14, 18
MEMBER_ID_REQUIRED = 79
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71
COORDINATOR_NOT_AVAILABLE = 15
FULL_FETCH_EPOCH = -1  # KIP-227: a full fetch outside any session


def p99(samples_ms: list[float]) -> float:
    return statistics.quantiles(samples_ms, n=100)[98] if len(samples_ms) > 1 else samples_ms[0]


def metadata_latencies(port: int, count: int, warm: int = 3) -> list[float]:
    """ms per Metadata v12 request for all topics, one after the other on one connection (the
    answer is read whole but not decoded: the client's decoding is not the broker's cost).
    The first ``warm`` are not counted: a broker's first request of an API version imports
    its schema (a one-off of a few hundred ms on this VM)."""
    out = []
    with KafkaConnection(port, timeout=60) as conn:
        for i in range(warm + count):
            t = time.perf_counter()
            conn.call_raw(
                METADATA,
                12,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            if i >= warm:
                out.append((time.perf_counter() - t) * 1000)
    return out


def idle_connections(port: int, count: int) -> list[KafkaConnection]:
    """``count`` connections that each completed ApiVersions (as every client's first request)
    and then say nothing; the caller closes them."""
    conns: list[KafkaConnection] = []
    try:
        for _ in range(count):
            conn = KafkaConnection(port, timeout=30)
            conns.append(conn)
            r = conn.call(
                API_VERSIONS, 3, client_software_name="rafka-bench", client_software_version="1"
            )
            if r.error_code != 0:
                raise RuntimeError(f"ApiVersions answered {r.error_code!r}")
    except BaseException:
        close_all(conns)
        raise
    return conns


def close_all(conns: Iterable[KafkaConnection]) -> None:
    for conn in conns:
        conn.sock.close()


# -- consumer groups of one member ---------------------------------------------------------------


def _subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0 (its version first): the topic, no user data."""
    return struct.pack(">h", 0) + encode(Subscription(topics=(topic,), user_data=None))


def _assignment(topic: str, partition: int) -> bytes:
    """ConsumerProtocolAssignment v0 (its version first): one partition, no user data."""
    owned = AssignedPartition(topic=TopicName(topic), partitions=(i32(partition),))
    return struct.pack(">h", 0) + encode(Assignment(assigned_partitions=(owned,), user_data=None))


@dataclass
class Member:
    """A group's one member, on its own coordinator connection."""

    group: str
    conn: KafkaConnection
    port: int  # its coordinator's
    member_id: str = ""
    generation: int = -1


@dataclass
class Groups:
    """Groups of one member each, all joined and synced; a thread heartbeats them every
    ``heartbeat_s`` as a consumer's background thread would."""

    members: list[Member]
    heartbeat_s: float
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start_heartbeats(self) -> None:
        self._thread = threading.Thread(target=self._heartbeat, daemon=True)
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with self._lock:
                sent = [
                    (m, m.conn.send(HEARTBEAT, 3, **_identity(m), group_instance_id=None))
                    for m in self.members
                ]
                for m, corr in sent:
                    r = m.conn.receive(HEARTBEAT, 3, corr)
                    if r.error_code != 0:
                        self.errors.append(f"{m.group}: heartbeat {r.error_code!r}")

    def close(self) -> None:
        """Stop heartbeating, leave every group (LeaveGroup: no session expiry to follow) and
        close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        with self._lock:
            lb = builder(LEAVE_GROUP, 4)
            sent = [
                (
                    m,
                    m.conn.send(
                        LEAVE_GROUP,
                        4,
                        group_id=m.group,
                        members=(lb.MemberIdentity(member_id=m.member_id, group_instance_id=None),),
                    ),
                )
                for m in self.members
            ]
            for m, corr in sent:
                m.conn.receive(LEAVE_GROUP, 4, corr)
            close_all(m.conn for m in self.members)


def _identity(m: Member) -> dict[str, object]:
    return {"group_id": m.group, "generation_id": m.generation, "member_id": m.member_id}


def coordinator_ports(port: int, groups: list[str]) -> dict[str, int]:
    """FindCoordinator v4 for all the groups at once, polled until each has a coordinator (the
    first call creates __consumer_offsets)."""
    deadline = time.monotonic() + 60
    with KafkaConnection(port, timeout=30) as conn:
        while True:
            r = conn.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=tuple(groups))
            if all(c.error_code == 0 for c in r.coordinators):
                return {c.key: c.port for c in r.coordinators}
            if time.monotonic() > deadline:
                bad = next(c for c in r.coordinators if c.error_code != 0)
                raise RuntimeError(f"FindCoordinator {bad.key}: {bad.error_code!r}")
            time.sleep(0.2)


def join_groups(port: int, names: list[str], topic: str, heartbeat_s: float = 3.0) -> Groups:
    """One member per group name, joined (JoinGroup v5: the member id round of KIP-394) and
    synced as its group's leader with partition 0 of ``topic``, every group in flight at once."""
    ports = coordinator_ports(port, names)
    members: list[Member] = []
    try:
        for name in names:
            members.append(Member(name, KafkaConnection(ports[name], timeout=60), ports[name]))
        jb = builder(JOIN_GROUP, 5)
        protocol = jb.JoinGroupRequestProtocol(name="range", metadata=_subscription(topic))
        pending = members
        for _ in range(2):  # the second round carries the member id the broker asked for
            sent = [
                (
                    m,
                    m.conn.send(
                        JOIN_GROUP,
                        5,
                        group_id=m.group,
                        session_timeout=30_000,
                        rebalance_timeout=60_000,
                        member_id=m.member_id,
                        group_instance_id=None,
                        protocol_type="consumer",
                        protocols=(protocol,),
                    ),
                )
                for m in pending
            ]
            again = []
            for m, corr in sent:
                r = m.conn.receive(JOIN_GROUP, 5, corr)
                m.member_id = r.member_id
                if r.error_code == MEMBER_ID_REQUIRED:
                    again.append(m)
                elif r.error_code != 0:
                    raise RuntimeError(f"{m.group}: JoinGroup {r.error_code!r}")
                else:
                    m.generation = r.generation_id
            pending = again
        if pending:
            raise RuntimeError(f"{len(pending)} members still asked for a member id")
        sb = builder(SYNC_GROUP, 3)
        sent = [
            (
                m,
                m.conn.send(
                    SYNC_GROUP,
                    3,
                    **_identity(m),
                    group_instance_id=None,
                    assignments=(
                        sb.SyncGroupRequestAssignment(
                            member_id=m.member_id, assignment=_assignment(topic, 0)
                        ),
                    ),
                ),
            )
            for m in members
        ]
        for m, corr in sent:
            r = m.conn.receive(SYNC_GROUP, 3, corr)
            if r.error_code != 0:
                raise RuntimeError(f"{m.group}: SyncGroup {r.error_code!r}")
    except BaseException:
        close_all(m.conn for m in members)
        raise
    groups = Groups(members, heartbeat_s)
    groups.start_heartbeats()
    return groups


def commit_latencies(groups: Groups, topic: str, seconds: float) -> list[float]:
    """ms per synchronous OffsetCommit v8 (one partition), going round the groups for
    ``seconds``, on one more connection to each coordinator (a committing client's)."""
    ob = builder(OFFSET_COMMIT, 8)
    out: list[float] = []
    offset = 0
    conns: dict[int, KafkaConnection] = {}
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for m in groups.members:
                if m.port not in conns:
                    conns[m.port] = KafkaConnection(m.port, timeout=30)
                offset += 1
                part = ob.OffsetCommitRequestPartition(
                    partition_index=0,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
                t = time.perf_counter()
                r = conns[m.port].call(
                    OFFSET_COMMIT,
                    8,
                    group_id=m.group,
                    generation_id_or_member_epoch=m.generation,
                    member_id=m.member_id,
                    group_instance_id=None,
                    topics=(ob.OffsetCommitRequestTopic(name=topic, partitions=(part,)),),
                )
                out.append((time.perf_counter() - t) * 1000)
                code = r.topics[0].partitions[0].error_code
                if code != 0:
                    raise RuntimeError(f"{m.group}: OffsetCommit {code!r}")
                if time.monotonic() >= deadline:
                    break
    finally:
        close_all(conns.values())
    return out


# -- a consumer's fetches, with and without a fetch session --------------------------------------


class NoSession(RuntimeError):
    """The broker answered a session-creating fetch without a session id (no KIP-227)."""


@dataclass
class FetchRun:
    fetches: int
    partitions_sent: int  # partitions listed in all the requests together
    session_errors: int  # FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH answers


def fetch_loop(
    port: int, topic: str, partitions: int, seconds: float, sessions: bool, max_wait_ms: int = 100
) -> FetchRun:
    """Fetch v12 of every partition of ``topic`` from its end for ``seconds``, as a consumer
    keeping up with a trickle: without sessions every request lists every partition; with one
    (KIP-227) the first request creates it and the next ones list only the partitions whose
    fetch offset moved. Raises NoSession when the broker opens none."""
    fb = builder(FETCH, 12)
    with KafkaConnection(port, timeout=30) as conn:
        offsets = _ends(conn, topic, partitions)
        session_id, epoch = 0, 0 if sessions else FULL_FETCH_EPOCH
        changed = set(offsets)  # a full request lists them all
        run = FetchRun(0, 0, 0)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            listed = sorted(changed)
            parts = tuple(
                fb.FetchPartition(
                    partition=p,
                    current_leader_epoch=-1,
                    fetch_offset=offsets[p],
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=1_048_576,
                )
                for p in listed
            )
            topics = (fb.FetchTopic(topic=topic, partitions=parts),) if parts else ()
            r = conn.call(
                FETCH,
                12,
                replica_id=-1,
                max_wait=max_wait_ms,
                min_bytes=1,
                max_bytes=52_428_800,
                isolation_level=0,
                session_id=session_id,
                session_epoch=epoch,
                topics=topics,
                forgotten_topics_data=(),
                rack_id="",
            )
            run.fetches += 1
            run.partitions_sent += len(listed)
            if r.error_code in (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
                run.session_errors += 1  # start a new session with a full request
                session_id, epoch, changed = 0, 0, set(offsets)
                continue
            if r.error_code != 0:
                raise RuntimeError(f"Fetch answered {r.error_code!r}")
            if sessions and epoch == 0:
                if r.session_id == 0:
                    raise NoSession("the broker opened no fetch session (KIP-227)")
                session_id = r.session_id
            changed = set() if sessions else set(offsets)
            for t in r.responses:
                for p in t.partitions:
                    if p.records and p.high_watermark > offsets[p.partition_index]:
                        offsets[p.partition_index] = p.high_watermark
                        changed.add(p.partition_index)
            if sessions:
                epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        return run


def _ends(conn: KafkaConnection, topic: str, partitions: int) -> dict[int, int]:
    """The latest offset of every partition (ListOffsets v7)."""
    lb = builder(2, 7)
    r = conn.call(
        2,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=(
            lb.ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    lb.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=-1
                    )
                    for p in range(partitions)
                ),
            ),
        ),
    )
    return {p.partition_index: p.offset for t in r.topics for p in t.partitions}
