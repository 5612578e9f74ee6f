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

from meta import raft_port, records, wire
from meta.commands import Body, Command
from meta.feed import ChangeFeed
from meta.journal import (
    DurableJournal,
    Entry,
    StateDumpError,
    dump_codec,
    open_journal,
    read_dump,
)
from meta.raft_port import MAX_ENTRY_BYTES, GuardedConnection, GuardedServer, GuardedTransport
from meta.state import MetaState, apply

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


class _SyncObj(SyncObj):
    """pysyncobj's SyncObj, telling ``on_dump_loaded`` (with its last applied index) after each
    load of a state dump: pysyncobj catches and only logs a load that fails, at any step."""

    def __init__(self, *args: Any, on_dump_loaded: Callable[[int], None], **kwargs: Any) -> None:
        self._on_dump_loaded = on_dump_loaded
        super().__init__(*args, **kwargs)

    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> None:
        SyncObj._SyncObj__loadDumpFile(self, clearJournal)  # type: ignore[attr-defined]
        self._on_dump_loaded(self._SyncObj__raftLastApplied)  # type: ignore[attr-defined]


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
    ) -> None:
        """``on_leadership`` is called (on the Raft thread) whenever this node becomes leader.
        ``password`` (the same on every node) encrypts and authenticates the peers' traffic:
        a connection that does not know it is dropped before anything it sends is unpickled.
        Peers without one raise RaftPasswordError; a node without peers makes a random one.

        A state dump in ``data_dir`` that cannot be loaded raises StateDumpError (pysyncobj
        would only log it, and serve the state without what the dump held). One the leader
        sends later that cannot be loaded sets ``failure``: the node must stop."""
        if password is None:
            if peer_addresses:
                raise RaftPasswordError(
                    f"{len(peer_addresses) + 1} Raft voters need a shared password: without "
                    "one, whoever reaches a Raft port could send the peers pickled messages"
                )
            password = secrets.token_hex(32)  # no peer: nobody needs to know it
        self.machine = MetaStateMachine(feed)
        # Why this node cannot go on (a state dump from the leader failed to load), or None.
        self.failure: str | None = None
        self._dump: tuple[Any, ...] | Exception | None = None  # the last load's outcome
        dump = data_dir / "state.dump"
        if dump.exists():
            read_dump(dump, self.machine._decode)
        serialize, deserialize = dump_codec(
            self.machine._serialize, self.machine._decode, self.machine._deserialize
        )
        self._write_timeout_s = write_timeout_s
        self._on_leadership = on_leadership
        conf = SyncObjConf(
            journalFile=str(data_dir / "raft.log"),
            fullDumpFile=str(data_dir / "state.dump"),
            serializer=serialize,  # the dump fsynced before its rename (meta.journal)
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
        )
        self._sync = _SyncObj(
            self_address,
            peer_addresses,
            conf,
            consumers=[self.machine],
            transportClass=DurableTransport,
            on_dump_loaded=self._dump_loaded,
        )
        try:
            self._sync.waitBinded()
        except SyncObjException as exc:
            self._sync.destroy()
            raise RaftStartError(f"cannot bind the Raft endpoint {self_address}") from exc

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
        return position

    def _dump_loaded(self, last_applied: int) -> None:
        """pysyncobj finished loading a state dump (on the Raft thread): the one on disk at
        start-up (read once before, so it loads) or one the leader sent this lagging node.
        pysyncobj only logs a load that failed, and the node would go on with the state it had,
        never catching up (the leader sends the same dump again), or, failing past the state's
        swap (the Raft log not reset to the dump), apply old log entries onto the new state.
        Either way ``failure`` says so: the node stops rather than serve that state."""
        outcome, self._dump = self._dump, None
        if isinstance(outcome, tuple) and outcome[0][1] == last_applied:
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
