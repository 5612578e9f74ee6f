"""This node's member of the Raft quorum: pysyncobj replicating ``meta.state`` commands.

pysyncobj runs Raft on its own thread and calls ``MetaStateMachine.apply_command`` there, in log
order, on every node. A command submitted on a follower is forwarded by pysyncobj to the leader
(its ``apply_command`` message) and the caller gets the result once the follower itself has
applied the entry, so a write sent to any node behaves the same and is visible there on return.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _RAFT_STATE, SyncObjException
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

from meta import wire
from meta.feed import ChangeFeed
from meta.state import Body, Command, MetaState, apply

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


class NoLeaderError(Exception):
    """A write could not be committed in time: no Raft leader, or no quorum behind it."""


class RaftStartError(Exception):
    """The Raft endpoint could not be bound."""


class MetaStateMachine(SyncObjConsumer):
    """The replicated object: ``state``, under ``lock``, changed only by ``apply_command``."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.lock = threading.RLock()
        self._feed = feed
        super().__init__()  # attributes set above stay local; those set below are replicated
        self.state = MetaState()

    @replicated
    def apply_command(self, command: Command) -> Any:
        with self.lock:
            applied = apply(self.state, command)
            self._feed.publish([wire.change_event(self.state, c) for c in applied.changes])
        return applied.result

    def _deserialize(self, data: dict[str, Any]) -> None:
        """pysyncobj loaded a state dump (at start-up or sent by the leader)."""
        with self.lock:
            super()._deserialize(data)
            self._feed.reset(self.state.offset)
        log.info("Loaded a metadata snapshot at offset %d", self.state.offset)


class ReresolvingTransport(TCPTransport):
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
    ) -> None:
        """``on_leadership`` is called (on the Raft thread) whenever this node becomes leader."""
        self.machine = MetaStateMachine(feed)
        self._write_timeout_s = write_timeout_s
        self._on_leadership = on_leadership
        conf = SyncObjConf(
            journalFile=str(data_dir / "raft.journal"),
            fullDumpFile=str(data_dir / "state.dump"),
            commandsWaitLeader=False,  # fail fast (MISSING_LEADER); submit() retries until timeout
            useFork=False,  # forking next to gRPC threads is unsafe; the state is small
            appendEntriesUseBatch=False,  # replicate each command at once: low write latency
            connectionRetryTime=1.0,  # reconnect to a restarted peer quickly
            # A restarted peer may come back with a new address (every Kubernetes pod restart
            # does): resolve peer names again after seconds, not pysyncobj's 10 minutes.
            dnsCacheTime=2.0,
            dnsFailCacheTime=1.0,
            leaderFallbackTimeout=3.0,  # a leader cut off from the majority steps down soon
            maxBindRetries=3,
            onStateChanged=self._on_state_changed,
        )
        self._sync = SyncObj(
            self_address,
            peer_addresses,
            conf,
            consumers=[self.machine],
            transportClass=ReresolvingTransport,
        )
        try:
            self._sync.waitBinded()
        except SyncObjException as exc:
            self._sync.destroy()
            raise RaftStartError(f"cannot bind the Raft endpoint {self_address}") from exc

    def submit(self, body: Body, request_id: str = "") -> Any:
        """Replicate and apply one command; return its result once applied on this node.

        Raises NoLeaderError if that did not happen within the write timeout.
        """
        command = Command(request_id or uuid.uuid4().hex, int(time.time() * 1000), body)
        deadline = time.monotonic() + self._write_timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                return self.machine.apply_command(command, sync=True, timeout=remaining)
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

    def leader_address(self) -> str | None:
        """Raft address of the leader this node knows of, if any."""
        leader = self._sync._getLeader()
        return None if leader is None else leader.address

    def destroy(self) -> None:
        """Stop Raft and close the journal."""
        self._sync.destroy_synchronous()

    def _on_state_changed(self, old: int, new: int) -> None:
        if new == _RAFT_STATE.LEADER:
            log.info("This node is now the Raft leader")
            self._on_leadership()
        elif old == _RAFT_STATE.LEADER:
            log.info("This node is no longer the Raft leader")
