"""This node's member of the Raft quorum: pysyncobj replicating ``meta.commands`` commands.

pysyncobj runs Raft on its own thread and calls ``MetaStateMachine.apply_command`` there, in log
order, on every node. A command submitted on a follower is forwarded by pysyncobj to the leader
(its ``apply_command`` message) and the caller gets the result once the follower itself has
applied the entry, so a write sent to any node behaves the same and is visible there on return.
Log entries and state dumps hold ``meta.records`` records. A state dump that cannot be loaded
stops the node: at start-up (StateDumpError), or sent by the leader to catch this node up
(``MetaRaft.failure``), rather than serve a state without it.

Raft peers always share a password (pysyncobj's, derived from ``internal.secret``): their frames
are authenticated before anything in them is unpickled, and bounded before they are buffered
(``meta.raft_port``). A single node without ``internal.secret`` takes a random one: it has no
peer, so nobody may talk to its Raft port.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pysyncobj.pickle
import pysyncobj.syncobj
import pysyncobj.tcp_server
import pysyncobj.transport
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.journal import MemoryJournal
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _RAFT_STATE, SyncObjException
from pysyncobj.tcp_connection import CONNECTION_STATE

from meta import quorum, raft_port, records, wire
from meta.commands import Body, Command
from meta.dispatch import apply
from meta.feed import ChangeFeed
from meta.journal import (
    DurableJournal,
    Entry,
    StateDumpError,
    dump_codec,
    open_journal,
    read_dump,
)
from meta.quorum import Member
from meta.raft_port import MAX_ENTRY_BYTES, GuardedConnection, GuardedServer, GuardedTransport
from meta.state import MetaState

log = logging.getLogger("rafka.meta.raft")

_RETRY_PAUSE_S = 0.05
# Outcomes after which the command may or may not have been applied: resubmitting it is safe,
# since the state remembers request ids and does not apply one twice.
_RETRIABLE = {
    FAIL_REASON.QUEUE_FULL,
    FAIL_REASON.MISSING_LEADER,
    FAIL_REASON.DISCARDED,
    FAIL_REASON.NOT_LEADER,
    FAIL_REASON.LEADER_CHANGED,
    FAIL_REASON.UNKNOWN_OUTCOME,
    "Timeout",
}


# pysyncobj builds its journal with this module-level factory and has no setting for another
# kind: every meta node's Raft log is a DurableJournal (see meta.journal for why).
pysyncobj.syncobj.createJournal = lambda path: (
    MemoryJournal() if path is None else open_journal(Path(path))
)
# Nor for its connections, listener or unpickling: these are meta.raft_port's, which bound
# frames before they are buffered, keep listening and build only the classes Raft data holds.
pysyncobj.tcp_server.TcpConnection = GuardedConnection
pysyncobj.transport.TcpConnection = GuardedConnection
pysyncobj.transport.TcpServer = GuardedServer  # nor for its listener (meta.raft_port too)
pysyncobj.pickle.loads = raft_port.loads
pysyncobj.pickle.load = raft_port.load


class NoLeaderError(Exception):
    """A write could not be committed in time: no Raft leader, or no quorum behind it."""


class RaftStartError(Exception):
    """The Raft endpoint could not be bound."""


class RaftPasswordError(ValueError):
    """Raft peers were given without the password that authenticates them to each other."""


class CommandTooLargeError(ValueError):
    """A command's record is over the size a Raft log entry may have."""


class MetaStateMachine(SyncObjConsumer):
    """The replicated object: ``state``, under ``lock``, changed only by ``apply_command``."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.lock = threading.RLock()
        self._feed = feed
        super().__init__()  # attributes set above stay local; those set below are replicated
        self.state = MetaState()

    @replicated
    def apply_command(self, record: bytes | Command) -> Any:
        """Apply a log entry: a command record, or a ``Command`` in an entry of the pickled
        format (unpickled by pysyncobj)."""
        command = records.decode_command(record) if isinstance(record, bytes) else record
        with self.lock:
            applied = apply(self.state, command)
            self._feed.publish([wire.change_event(self.state, c) for c in applied.changes])
        return applied.result

    def _serialize(self) -> bytes:
        """The state for a dump (on the Raft thread, so no command changes it meanwhile)."""
        return records.encode_state(self.state)

    @staticmethod
    def _decode(data: bytes | dict[str, Any]) -> MetaState:
        """The state of a dump: a state record, or ``{"state": MetaState}`` in a dump of the
        pickled format."""
        if isinstance(data, bytes):
            return records.decode_state(data)
        return records.from_pickled_state(data["state"])

    def _deserialize(self, state: MetaState) -> None:
        """pysyncobj loaded a state dump (at start-up or sent by the leader)."""
        with self.lock:
            self.state = state
            self._feed.reset(state.offset)
        log.info("Loaded a metadata snapshot at offset %d", state.offset)


class ReresolvingTransport(GuardedTransport):
    """pysyncobj's TCP transport, with connection attempts bounded by connectionTimeout.

    A peer that restarts with a new IP (every Kubernetes pod restart; a container on a new
    address) does not resolve while it is down, so pysyncobj keeps its old address and dials
    it: nothing answers SYNs there, and pysyncobj waits for the kernel to give up (about two
    minutes) before it resolves the name again. Meanwhile that pair of nodes is cut off, and
    losing one more node leaves no majority. Abandoning an attempt after connectionTimeout
    makes the next one (connectionRetryTime later) resolve the name again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._unanswered: set[str] = set()  # peers said to be unreachable since they answered
        super().__init__(*args, **kwargs)

    def _connectIfNecessarySingle(self, node: TCPNode) -> bool:
        conn = self._connections.get(node)
        started = self._lastConnectAttempt.get(node)
        unanswered = self._unanswered
        if conn is not None and conn.state == CONNECTION_STATE.CONNECTED:
            unanswered.discard(node.address)
        elif (
            conn is not None
            and conn.state == CONNECTION_STATE.CONNECTING
            and started is not None
            and monotonic_time() - started > self._syncObj.conf.connectionTimeout
        ):
            if node.address not in unanswered:
                unanswered.add(node.address)
                log.warning(
                    "Raft peer %s does not answer; dialling it again, its name resolved anew "
                    "(check that the meta node runs and that its name resolves)",
                    node.address,
                )
            conn.disconnect()  # its callback dials again once connectionRetryTime has passed
        return super()._connectIfNecessarySingle(node)


def trim_append_entries(log: Sequence[Entry], message: dict[str, Any]) -> dict[str, Any]:
    """An AppendEntries ``message`` rewritten so that pysyncobj, applying it to ``log``, deletes
    entries only from the first conflict, as Raft's receiver rules say.

    pysyncobj deletes every entry after the message's ``prevLogIdx`` before it appends the
    message's entries, those it already holds included. A follower thus un-persists entries it
    has acknowledged (the leader counts them in a majority) whenever the leader sends from
    further back, as it does after a stale "go back" answer: it writes them again, but a crash in
    between loses its copy. Here the entries the log already holds (same index, same term) leave
    the message and ``prevLogIdx`` moves past them. If nothing is left, entries after the matched
    ones stay when all are of the sender's term (its own, sent before: they match its log), and
    ``prevLogIdx`` moves to the log's end; entries of older terms there are cut, not re-written.
    Other messages pass unchanged."""
    if (
        message.get("type") != "append_entries"
        or "prevLogIdx" not in message
        or "transmission" in message
        or not log
    ):
        return message
    first = log[0][1]

    def term_at(index: int) -> int | None:
        position = index - first
        return log[position][2] if 0 <= position < len(log) else None

    if term_at(message["prevLogIdx"]) != message["prevLogTerm"]:
        return message  # pysyncobj answers that the logs differ there
    entries = list(message.get("entries") or [])
    held = 0
    while held < len(entries) and term_at(entries[held][1]) == entries[held][2]:
        held += 1
    if held < len(entries):
        if held == 0:
            return message  # the first entry is new or conflicts: deleting from it is right
        _, index, term = entries[held - 1]
        return message | {"prevLogIdx": index, "prevLogTerm": term, "entries": entries[held:]}
    matched = entries[-1][1] if entries else message["prevLogIdx"]
    beyond = log[matched - first + 1 :]
    if all(term == message["term"] for _, _, term in beyond):
        _, index, term = log[-1]
    else:
        index, term = matched, term_at(matched)
    if index == message["prevLogIdx"] and not entries:
        return message
    return message | {"prevLogIdx": index, "prevLogTerm": term, "entries": []}


class DurableTransport(ReresolvingTransport):
    """Sends nothing that reflects a Raft log write before that write is on disk.

    While the journal has unsynced writes (entries appended by the leader, or received by a
    follower), every outgoing message is held: AppendEntries, their acknowledgements, votes.
    At the end of each Raft tick one fdatasync covers all writes of the tick, then the held
    messages go out in order. A burst of commands thus costs one sync per tick (group commit),
    and a leader counts itself in a majority only for entries it has synced (it sends them to
    followers only after the sync). Received AppendEntries go through ``trim_append_entries``, so
    that what a follower acknowledged stays on its disk.

    pysyncobj's acknowledgement (``next_node_idx``) carries no term: one answering a leader of
    an earlier term, arriving once the same node leads again, would count towards a majority in
    the new term entries the follower may no longer hold. Acknowledgements are stamped with the
    sender's term here, and one of an earlier term than the receiver's is dropped (the leader
    asks again)."""

    def __init__(self, syncObj: SyncObj, *args: Any, **kwargs: Any) -> None:
        journal = syncObj._SyncObj__raftLog  # type: ignore[attr-defined]  # no accessor for it
        if not isinstance(journal, DurableJournal):
            raise TypeError(f"DurableTransport needs a DurableJournal, got {type(journal)}")
        self._journal = journal
        self._held: list[tuple[TCPNode, Any]] = []
        super().__init__(syncObj, *args, **kwargs)
        syncObj.addOnTickCallback(self.flush)

    def _term(self) -> int:
        return self._syncObj._SyncObj__raftCurrentTerm  # type: ignore[attr-defined]  # no accessor

    def _stale(self, acknowledgement: dict[str, Any]) -> bool:
        """Of an earlier term than this node's (one without a term, from an older node, is not)."""
        return "term" in acknowledgement and acknowledgement["term"] < self._term()

    def _onMessageReceived(self, node: TCPNode, message: Any) -> None:
        if isinstance(message, dict):
            if message.get("type") == "next_node_idx" and self._stale(message):
                log.debug("Dropped an acknowledgement of term %s from %s", message["term"], node)
                return
            message = trim_append_entries(self._journal, message)
        super()._onMessageReceived(node, message)

    def send(self, node: TCPNode, message: Any) -> bool:
        if isinstance(message, dict) and message.get("type") == "next_node_idx":
            message["term"] = self._term()
        if self._held or self._journal.dirty:
            self._held.append((node, message))
            return True  # "thought to be sent": pysyncobj retries what never arrives
        return super().send(node, message)

    def flush(self) -> None:
        """Sync the journal, then send what was held for it (on the Raft thread, every tick)."""
        self._journal.sync()
        held, self._held = self._held, []
        for node, message in held:
            super().send(node, message)


class QuorumTransport(DurableTransport):
    """The transport of a node that is a voter or an observer (``meta.quorum``).

    An observer dials every voter (pysyncobj dials only peers of a lower address) and names
    itself "readonly": voters accept it as pysyncobj's read-only node, which the leader sends
    the log to and takes commands from, without a vote. Switching roles drops every connection
    and dials again, so peers learn the node's new identity. A vote request from a node that is
    not a voter here (an observer, or a voter removed since) is dropped, and an observer grants
    no vote: neither can depose a leader or elect one."""

    def __init__(self, syncObj: SyncObj, *args: Any, **kwargs: Any) -> None:
        self.observer: bool = getattr(syncObj, "rafka_observer", False)
        self._dialed: list[Any] = []  # connections an observer opened (see set_observer)
        self.leader_heard_at = monotonic_time()  # the last AppendEntries (or the start)
        super().__init__(syncObj, *args, **kwargs)

    def _shouldConnect(self, node: Any) -> bool:
        if self.observer:
            return isinstance(node, TCPNode) and node not in self._preventConnectNodes
        return bool(super()._shouldConnect(node))

    def _sendSelfAddress(self, conn: Any) -> None:
        if self.observer:
            conn.send("readonly")
        else:
            super()._sendSelfAddress(conn)

    def addNode(self, node: Any) -> None:
        super().addNode(node)
        if self.observer and node in self._connections:
            self._dialed.append(self._connections[node])

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        if (
            isinstance(message, dict)
            and message.get("type") == "request_vote"
            and (self.observer or node not in self._nodes)
        ):
            log.debug("Dropped a vote request from %s: one of us is not a voter", node)
            return
        if isinstance(message, dict) and message.get("type") == "append_entries":
            self.leader_heard_at = monotonic_time()
        super()._onMessageReceived(node, message)

    def set_observer(self, observer: bool) -> None:
        """Switch roles (on the Raft thread): every connection is dropped and dialled anew."""
        if observer == self.observer:
            return
        self.observer = observer
        nodes = list(self._nodes)
        for node in nodes:
            self.dropNode(node)
            self._onNodeDisconnected(node)
        stray, self._dialed = self._dialed, []
        for conn in stray:  # an observer's dial replaced since by the peer's own
            conn.disconnect()
        for node in nodes:
            self.addNode(node)


class _SyncObj(SyncObj):
    """pysyncobj's SyncObj, telling ``on_dump_loaded`` (with its last applied index) after each
    load of a state dump (pysyncobj catches and only logs a load that fails, at any step), and
    ``on_self_change`` when a membership entry adds or removes this node. Membership entries
    may also be ``meta.quorum.UPDATE`` ones, which change a voter's identity only."""

    def __init__(
        self,
        *args: Any,
        on_dump_loaded: Callable[[int, bool], None],
        on_self_change: Callable[[bool, Member], None],
        observer: bool,
        **kwargs: Any,
    ) -> None:
        self._on_dump_loaded = on_dump_loaded
        self._on_self_change = on_self_change
        self.rafka_observer = observer  # read by QuorumTransport as pysyncobj builds it
        self.rafka_changed = False  # a membership entry was applied
        super().__init__(*args, **kwargs)

    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> None:
        SyncObj._SyncObj__loadDumpFile(self, clearJournal)  # type: ignore[attr-defined]
        self._on_dump_loaded(self._SyncObj__raftLastApplied, clearJournal)  # type: ignore[attr-defined]

    def _SyncObj__doChangeCluster(self, request: list[Any], reverse: bool = False) -> bool:
        kind, address = request[0], str(request[1])
        own = address == self.selfNode.id
        self.rafka_changed = True  # the quorum is no longer meta.quorum.voters (MetaRaft)
        if kind == quorum.UPDATE:
            node = request[3] if reverse and len(request) > 3 else request[2]
            if own:
                self._on_self_change(True, quorum.member_of(node))
                return True
            for other in self._SyncObj__otherNodes:  # type: ignore[attr-defined]
                if other == node:
                    for name in ("node_id", "grpc_address", "directory_id"):
                        setattr(other, name, getattr(node, name, ""))
                    return True
            return False
        changed = SyncObj._SyncObj__doChangeCluster(self, request, reverse)  # type: ignore[attr-defined]
        if own and kind in (quorum.ADD, quorum.REMOVE):
            self._on_self_change((kind == quorum.ADD) != reverse, quorum.member_of(request[2]))
        return bool(changed)


@dataclass(frozen=True)
class ReplicaProgress:
    """What the leader knows of a voter's replication (DescribeQuorum's ReplicaState)."""

    log_end: int  # -1: unknown (no acknowledgement since this node leads)
    last_fetch_ms: int  # the leader's wall clock; -1 unknown
    last_caught_up_ms: int


@dataclass(frozen=True)
class QuorumProgress:
    """The leader's view of the quorum, refreshed every Raft tick."""

    term: int
    commit_index: int
    log_end: int
    at_ms: int
    voters: dict[str, ReplicaProgress]  # by Raft address, the leader's own excluded


class MetaRaft:
    """Starts pysyncobj for this node and submits commands with bounded retries."""

    def __init__(
        self,
        self_address: str,
        peer_addresses: list[str],
        data_dir: Path,
        feed: ChangeFeed,
        write_timeout_s: float,
        on_leadership: Callable[[], None],
        password: str | None = None,
        identity: Member | None = None,
        bootstrap: Sequence[Member] | None = None,
    ) -> None:
        """``on_leadership`` is called (on the Raft thread) whenever this node becomes leader.
        ``password`` (the same on every node) encrypts and authenticates the peers' traffic:
        a connection that does not know it is dropped before anything it sends is unpickled.
        Peers without one raise RaftPasswordError; a node without peers makes a random one.

        ``bootstrap`` (default: this node and ``peer_addresses``) are the voters of
        ``meta.quorum.voters``; the membership the data dir persists overrides them
        (``meta.quorum.persisted_members``). A node that is not among the voters starts as an
        observer. ``identity`` is this node's id, gRPC address and directory id.

        A state dump in ``data_dir`` that cannot be loaded raises StateDumpError (pysyncobj
        would only log it, and serve the state without what the dump held). One the leader
        sends later that cannot be loaded sets ``failure``: the node must stop."""
        self.identity = identity or Member(-1, self_address)
        if bootstrap is None:
            bootstrap = [Member(-1, address) for address in [self_address, *peer_addresses]]
        self._bootstrap = list(bootstrap)
        self.machine = MetaStateMachine(feed)
        # Why this node cannot go on (a state dump from the leader failed to load), or None.
        self.failure: str | None = None
        self._dump: tuple[Any, ...] | Exception | None = None  # the last load's outcome
        dump = data_dir / "state.dump"
        cluster = read_dump(dump, self.machine._decode)[1][2] if dump.exists() else None
        commands = _log_commands(data_dir / "raft.log")
        members = quorum.with_bootstrap_identity(
            quorum.persisted_members(bootstrap, cluster, commands), bootstrap
        )
        self._observer = self_address not in members
        # The quorum was changed since its bootstrap (or this node joins it): its dumps say so.
        self._dynamic = (
            self._observer
            or (cluster is not None and quorum.is_dynamic(cluster))
            or any(quorum.parse_change(command) for command in commands)
        )
        self._self_record = members.get(self_address, self.identity)
        self._pending_role: bool | None = None  # True: become a voter; False: an observer
        self._pending_quorum: list[Member] | None = None  # voters to adopt (`adopt_quorum`)
        self._progress: QuorumProgress | None = None
        self._caught_up: dict[str, int] = {}
        self._log_end = 0
        peers = [quorum.node_of(m) for address, m in members.items() if address != self_address]
        self.shared_password = password is not None
        if password is None:
            if peers:
                raise RaftPasswordError(
                    f"{len(peers) + 1} Raft voters need a shared password: without "
                    "one, whoever reaches a Raft port could send the peers pickled messages"
                )
            password = secrets.token_hex(32)  # no peer: nobody needs to know it
        serialize, deserialize = dump_codec(
            self.machine._serialize, self.machine._decode, self.machine._deserialize
        )
        self._write_timeout_s = write_timeout_s
        self._on_leadership = on_leadership
        conf = SyncObjConf(
            journalFile=str(data_dir / "raft.log"),
            fullDumpFile=str(data_dir / "state.dump"),
            # the dump fsynced before its rename (meta.journal), with this node's voters
            serializer=functools.partial(self._serialize_dump, serialize),
            deserializer=functools.partial(self._load_dump, deserialize),
            commandsWaitLeader=False,  # fail fast (MISSING_LEADER); submit() retries until timeout
            useFork=False,  # forking next to gRPC threads is unsafe; the state is small
            appendEntriesUseBatch=False,  # replicate each command at once: low write latency
            # One message per command, however large (a topic of thousands of partitions is
            # hundreds of KiB): pysyncobj's chunked transmission of entries over this size marks
            # the second-to-last chunk as the last when the pickled entry just crosses a chunk
            # boundary, and the followers fail to unpickle it ("pickle data was truncated").
            appendEntriesBatchSizeBytes=MAX_ENTRY_BYTES,
            connectionRetryTime=1.0,  # reconnect to a restarted peer quickly
            # A restarted peer may come back with a new address (every Kubernetes pod restart
            # does): resolve peer names again after seconds, not pysyncobj's 10 minutes.
            dnsCacheTime=2.0,
            dnsFailCacheTime=1.0,
            leaderFallbackTimeout=3.0,  # a leader cut off from the majority steps down soon
            maxBindRetries=3,
            password=password,
            onStateChanged=self._on_state_changed,
            dynamicMembershipChange=True,  # voters added and removed (meta.quorum)
        )
        self._sync = _SyncObj(
            quorum.node_of(self.identity),
            peers,
            conf,
            consumers=[self.machine],
            transportClass=QuorumTransport,
            on_dump_loaded=self._dump_loaded,
            on_self_change=self._on_self_change,
            observer=self._observer,
        )
        self._sync.addOnTickCallback(self._tick)
        try:
            self._sync.waitBinded()
        except SyncObjException as exc:
            self._sync.destroy()
            raise RaftStartError(f"cannot bind the Raft endpoint {self_address}") from exc
        if self._observer:
            log.info(
                "Raft endpoint %s is not among the voters %s: this meta node follows the Raft "
                "log as an observer until it is added as a voter",
                self_address,
                sorted(members),
            )

    # ---------------------------------------------------------------- the quorum

    @property
    def observer(self) -> bool:
        """Whether this node follows the log without a vote."""
        return self._observer

    def self_record(self) -> Member:
        """This node as the quorum records it (its identity until it is a voter)."""
        return self._self_record if not self._observer else self.identity

    def members(self) -> list[Member]:
        """The voters as this node knows them (this one included while it is a voter)."""
        found = {n.id: quorum.member_of(n) for n in self._sync.otherNodes}
        if not self._observer:
            found[self.identity.raft_address] = self._self_record
        return sorted(
            quorum.with_bootstrap_identity(found, self._bootstrap).values(),
            key=lambda m: m.node_id,
        )

    def progress(self) -> QuorumProgress | None:
        """The leader's view of the quorum (None unless this node leads)."""
        return self._progress if self.is_leader() else None

    def log_end(self) -> int:
        """The index of this node's last Raft log entry."""
        return self._log_end

    def uncommitted_change(self) -> bool:
        """Whether a membership entry of the log is not committed yet (at most one may be)."""
        commit = self._sync.raftCommitIndex
        tail = self._sync._SyncObj__raftLog[-64:]  # type: ignore[attr-defined]
        return any(
            index > commit and command[:1] == bytes([quorum.MEMBERSHIP])
            for command, index, _ in tail
        )

    def change_membership(self, request: list[Any], timeout_s: float) -> int | None:
        """Append a membership entry (``meta.quorum.change_request``); pysyncobj's outcome
        (FAIL_REASON) once it is committed or refused, None if neither within ``timeout_s``."""
        done = threading.Event()
        outcome: list[int] = []

        def callback(_result: Any, error: int) -> None:
            outcome.append(error)
            done.set()

        self._sync._applyCommand(pysyncobj.pickle.dumps(request), callback, quorum.MEMBERSHIP)
        return outcome[0] if done.wait(timeout_s) else None

    def leaderless_for(self) -> float:
        """Seconds since this node last led or heard from a leader."""
        if self.is_leader():
            return 0.0
        transport = self._sync._SyncObj__transport  # type: ignore[attr-defined]
        return float(monotonic_time() - transport.leader_heard_at)

    def adopt_quorum(self, voters: Sequence[Member]) -> None:
        """Take the voters the leader named (``meta.quorum_service`` asked it, having heard from
        no leader for long): a voter removed meanwhile becomes an observer, an observer started
        with stale peers finds the leader. Applied at the end of the Raft tick."""
        self._dynamic = True
        self._pending_quorum = list(voters)

    def transfer_leadership(self) -> None:
        """Ask pysyncobj to hand leadership to the most caught-up voter (best effort)."""
        self._sync.transferLeadership()

    def _on_self_change(self, voter: bool, record: Member) -> None:
        """A membership entry added, updated or removed this node (on the Raft thread)."""
        if voter:
            self._self_record = record
        if voter == self._observer:
            self._pending_role = voter  # switched at the end of the tick (`_tick`)

    def _tick(self) -> None:
        """Once per Raft tick, on its thread: role switches, an observer's election timer,
        and the leader's view of the quorum."""
        sync = self._sync
        if self._pending_quorum is not None:
            adopted, self._pending_quorum = self._pending_quorum, None
            own = self.identity.raft_address
            others = [quorum.node_of(m) for m in adopted if m.raft_address != own]
            sync._SyncObj__updateClusterConfiguration(others)  # type: ignore[attr-defined]
            record = next((m for m in adopted if m.raft_address == own), None)
            self._on_self_change(record is not None, record or self.identity)
        if self._pending_role is not None:
            voter, self._pending_role = self._pending_role, None
            self._observer = not voter
            sync._SyncObj__transport.set_observer(self._observer)  # type: ignore[attr-defined]
            log.info(
                "This meta node (%s) is now %s of the quorum",
                self.identity.key(),
                "a voter" if voter else "an observer (it was removed from the voters)",
            )
        raft_log = sync._SyncObj__raftLog  # type: ignore[attr-defined]
        self._log_end = raft_log[-1][1]
        if self._observer:  # never a candidate: it has no vote
            sync._SyncObj__raftElectionDeadline = monotonic_time() + 3600  # type: ignore[attr-defined]
        if not sync._isLeader():
            self._caught_up.clear()
            return
        now_ms, now = int(time.time() * 1000), monotonic_time()
        matched = sync._SyncObj__raftMatchIndex  # type: ignore[attr-defined]
        answered = sync._SyncObj__lastResponseTime  # type: ignore[attr-defined]
        voters = {}
        for node in sync._SyncObj__otherNodes:  # type: ignore[attr-defined]
            match = matched.get(node, 0)
            if match >= self._log_end:
                self._caught_up[node.id] = now_ms
            voters[node.id] = ReplicaProgress(
                match if match > 0 else -1,
                int(now_ms - (now - answered.get(node, now)) * 1000) if match > 0 else -1,
                self._caught_up.get(node.id, -1),
            )
        self._progress = QuorumProgress(
            sync.raftCurrentTerm, sync.raftCommitIndex, self._log_end, now_ms, voters
        )

    def _serialize_dump(
        self, serialize: Callable[[str, Any], None], file: str, position: Any
    ) -> None:
        """pysyncobj's dump, whose set of nodes holds this one only while it is a voter, as
        the quorum records it (pysyncobj puts every node it runs with in it)."""
        applied, first, cluster = position
        own = self.identity.raft_address
        members = {n.id: quorum.member_of(n) for n in cluster if n.id != own}
        if not self._observer:
            members[own] = self._self_record
        members = quorum.with_bootstrap_identity(members, self._bootstrap)
        dynamic = self._dynamic or self._sync.rafka_changed
        serialize(file, (applied, first, quorum.dump_nodes(members.values(), dynamic)))

    def submit(self, body: Body, request_id: str = "") -> Any:
        """Replicate and apply one command; return its result once applied on this node.

        Raises NoLeaderError if that did not happen within the write timeout, and
        CommandTooLargeError for a command over MAX_ENTRY_BYTES.
        """
        command = Command(request_id or uuid.uuid4().hex, int(time.time() * 1000), body)
        record = records.encode_command(command)
        if len(record) > MAX_ENTRY_BYTES:  # the Raft port's frame bound counts on it
            raise CommandTooLargeError(
                f"the {type(body).__name__} command is {len(record)} bytes, over the "
                f"{MAX_ENTRY_BYTES} a Raft log entry may have: split the request"
            )
        deadline = time.monotonic() + self._write_timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                return self.machine.apply_command(record, sync=True, timeout=remaining)
            except SyncObjException as exc:
                if exc.errorCode not in _RETRIABLE:
                    raise
                log.debug("Command %s not applied yet (%s); retrying", command.request_id, exc)
            time.sleep(min(_RETRY_PAUSE_S, max(0.0, deadline - time.monotonic())))
        raise NoLeaderError(
            f"no Raft leader committed the write within {self._write_timeout_s:g}s; "
            "a majority of meta nodes must be up and connected"
        )

    def is_leader(self) -> bool:
        return self._sync._isLeader()

    def status(self) -> dict[str, Any]:
        """pysyncobj's status: raft_term, commit_idx, last_applied, leader (for metrics)."""
        return self._sync.getStatus()

    def leader_address(self) -> str | None:
        """Raft address of the leader this node knows of, if any."""
        leader = self._sync._getLeader()
        return None if leader is None else leader.address

    def destroy(self) -> None:
        """Stop Raft and close the journal."""
        self._sync.destroy_synchronous()

    def _load_dump(self, load: Callable[[str], tuple[Any, ...]], file: str) -> tuple[Any, ...]:
        """pysyncobj's load of a state dump (meta.journal.dump_codec's), its outcome kept for
        `_dump_loaded`."""
        try:
            self._dump = position = load(file)
        except Exception as exc:
            self._dump = exc
            raise
        if quorum.is_dynamic(position[2]):
            self._dynamic = True
        else:  # a quorum never changed follows meta.quorum.voters (`persisted_members`)
            position = (*position[:2], quorum.dump_nodes(self._bootstrap, dynamic=False))
        return position

    def _dump_loaded(self, last_applied: int, from_leader: bool) -> None:
        """pysyncobj finished loading a state dump (on the Raft thread): the one on disk at
        start-up (read once before, so it loads) or one the leader sent this lagging node.
        pysyncobj only logs a load that failed, and the node would go on with the state it had,
        never catching up (the leader sends the same dump again), or, failing past the state's
        swap (the Raft log not reset to the dump), apply old log entries onto the new state.
        Either way ``failure`` says so: the node stops rather than serve that state."""
        outcome, self._dump = self._dump, None
        if isinstance(outcome, tuple) and outcome[0][1] == last_applied:
            if from_leader:  # its voters may add or remove this node (entries compacted away)
                own = self.identity.raft_address
                record = next((n for n in outcome[2] if n.id == own), None)
                member = self.identity if record is None else quorum.member_of(record)
                self._on_self_change(record is not None, member)
            return
        if self.failure is not None:
            return
        if isinstance(outcome, StateDumpError):  # it names the file and why
            what = f"{outcome}, as the Raft leader sent it"
        elif isinstance(outcome, Exception):
            what = f"the metadata state dump the Raft leader sent cannot be loaded ({outcome!r})"
        else:
            what = (
                "the metadata state dump the Raft leader sent was loaded, but the Raft log "
                "could not be reset to it (see the error above)"
            )
        self.failure = (
            f"{what}; this meta node stops rather than serve metadata without it. If the "
            "leader runs a newer Rafka version, upgrade this node; then start it again (if its "
            "dump still cannot be loaded, move its meta.data.dir aside and start it with an "
            "empty one: it catches up from the other meta nodes)"
        )
        log.error("%s", self.failure)

    def _on_state_changed(self, old: int, new: int) -> None:
        if new == _RAFT_STATE.LEADER:
            log.info("This node is now the Raft leader")
            self._on_leadership()
        elif old == _RAFT_STATE.LEADER:
            log.info("This node is no longer the Raft leader")


def _log_commands(path: Path) -> list[bytes]:
    """The commands of the Raft log at ``path`` (none if there is no log yet)."""
    if not path.exists() and not path.with_name("raft.journal").exists():
        return []
    journal = open_journal(path)
    try:
        return [journal[i][0] for i in range(len(journal))]
    finally:
        journal._destroy()
