"""What a meta node's Raft port admits: bounded frames, and nothing unpickled that a peer without
the cluster's Raft password could have written.

pysyncobj's TCP transport reads length-prefixed frames (a native signed 32-bit length, then a
zlib-compressed pickle, Fernet-encrypted when a password is set), and buffers a whole frame
before it looks at it: a stranger announcing 2 GiB got 2 GiB of the node's memory. Here
(`GuardedConnection`) a frame's length is checked as soon as its 4 bytes arrive, against
`HANDSHAKE_FRAME_BYTES` until the peer has proved it knows the password (its frame carried the
random key this node sent it, which only the password's holder can encrypt) and against
`MAX_FRAME_BYTES` after; a longer frame closes the connection before more of it is read.
Reading also stops at each whole frame until it is parsed, so that an unproven peer never has
more than one frame buffered.

The listener (`GuardedServer`) never closes for good: pysyncobj's unbinds its socket on any
failed accept but EAGAIN, so a connection flood that ran the node out of descriptors (EMFILE)
closed its Raft port until a restart. Here a failed accept pauses the listener for
`_ACCEPT_BACKOFF_S` (the connections already open are served meanwhile), then it listens again.
A connection that has not proved the password is dropped after `HANDSHAKE_TIMEOUT_S`, and at
most `UNPROVEN_PER_PEER` per peer are held at once: more are closed as soon as accepted, so a
flood holds a bounded number of descriptors, each for seconds (`GuardedTransport` sets the bound
and drives both from pysyncobj's ticks).

The password itself is the authentication (`meta.raft.MetaRaft` never runs Raft without one):
Fernet checks a frame's HMAC before anything is decrypted or unpickled. As a second line,
every pickle pysyncobj or this service loads (frames, log entries, state dumps) goes through
`loads`, which builds only the classes Raft data holds (`_RestrictedUnpickler`): a pickle that
would call anything else is refused before it runs.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import io
import logging
import pickle
import socket
import struct
from typing import IO, Any

from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.pickle import to_bytes
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport

from common.internal_security import RefusalLimiter

log = logging.getLogger("rafka.meta.raft")

# The largest command record a Raft log entry may hold (meta.raft.MetaRaft.submit refuses a
# larger one), and the batch size of the AppendEntries messages (pysyncobj's
# appendEntriesBatchSizeBytes). Metadata commands are far smaller: the gRPC requests behind
# them are at most 4 MiB, and a CreateTopics at most 10,000 partitions.
MAX_ENTRY_BYTES = 64 * 1024 * 1024
# The largest frame an authenticated peer sends: an AppendEntries batch holds entries up to
# MAX_ENTRY_BYTES plus the one that crosses it (so under 2 * MAX_ENTRY_BYTES of commands), and
# its frame (pickled, compressed, Fernet-encoded) measured at most 2.3 times the commands, for
# incompressible commands of 40 bytes. State dumps travel in chunks of 64 KiB.
MAX_FRAME_BYTES = 5 * MAX_ENTRY_BYTES
# The largest frame before the peer proved it knows the password: its random key and its
# address (a few hundred bytes encrypted), or one of pysyncobj's utility commands.
HANDSHAKE_FRAME_BYTES = 64 * 1024

# Connections this node holds at once that have not proved the password yet, per peer: a peer
# dials it once at a time, so a few times that leaves room for reconnects; a flood gets no more.
UNPROVEN_PER_PEER = 4
# Seconds an accepted connection has to prove the password (a peer does in two round trips).
HANDSHAKE_TIMEOUT_S = 5.0
_ACCEPT_BACKOFF_S = 0.2  # the listener's pause after a failed accept
_ACCEPTS_PER_EVENT = 64  # connections accepted per readiness of the listener, at most
_BACKLOG = 128  # the listen backlog (pysyncobj's: 5)
_FAILURES_LOGGED_EVERY = 100  # failed accepts in a row: the first and every this many are logged

_LENGTH = struct.Struct("i")  # pysyncobj's frame length: native byte order, signed
_refusals = RefusalLimiter()

# Globals Raft data may name: protocol 2 pickles bytes as _codecs.encode(str, "latin1"); state
# dumps hold the cluster's nodes as a set of pysyncobj nodes. Besides these, dataclasses and
# enums of the meta service's own modules (commands and states of the pickled format, still
# read: meta.records).
_ALLOWED_GLOBALS = frozenset(
    {
        ("_codecs", "encode"),
        ("__builtin__", "set"),  # protocol 2 names builtins so
        ("builtins", "set"),
        ("__builtin__", "frozenset"),
        ("builtins", "frozenset"),
        ("pysyncobj.node", "Node"),
        ("pysyncobj.node", "TCPNode"),
    }
)


# Protocol 2 pickles b"" as bytes() (the last chunk of a state dump the leader sends): built by
# `_empty_bytes`, since bytes(n) would allocate n bytes.
_BYTES = frozenset({("__builtin__", "bytes"), ("builtins", "bytes")})


def _empty_bytes(*args: object) -> bytes:
    if args:
        raise pickle.UnpicklingError("Raft data holds bytes() only empty")
    return b""


class _RestrictedUnpickler(pickle.Unpickler):
    """Builds only what Raft messages, log entries and dumps hold; refuses any other global
    (a function to call, a class with side effects) before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        if (module, name) in _BYTES:
            return _empty_bytes
        if module.startswith("meta."):
            found = super().find_class(module, name)
            if isinstance(found, type) and (
                dataclasses.is_dataclass(found) or issubclass(found, enum.Enum)
            ):
                return found
        raise pickle.UnpicklingError(f"Raft data may not name {module}.{name}")


def loads(data: bytes | str) -> Any:
    """pysyncobj's ``pickle.loads``, restricted (meta.raft installs it in pysyncobj)."""
    return _RestrictedUnpickler(io.BytesIO(to_bytes(data))).load()


def load(file: IO[bytes]) -> Any:
    """pysyncobj's ``pickle.load``, restricted."""
    return _RestrictedUnpickler(file).load()


class GuardedConnection(TcpConnection):
    """pysyncobj's connection with its frames bounded before they are buffered (meta.raft makes
    pysyncobj build these instead of its own). pysyncobj's private methods are overridden
    under their mangled names."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._proven = False  # the peer showed it knows the password
        sock = kwargs.get("socket")
        self._peer = _peer_of(sock) if sock is not None else "?"
        super().__init__(*args, **kwargs)

    @property
    def proven(self) -> bool:
        """Whether the peer has shown it knows the cluster's Raft password."""
        return self._proven

    def connect(self, host: str, port: int) -> bool:
        """pysyncobj's dial, which raises when no socket can be made (out of descriptors: its
        tick fails then); here that is logged, and pysyncobj dials again later."""
        self._proven = False
        self._peer = f"{host}:{port}"
        try:
            return bool(super().connect(host, port))
        except OSError as e:
            self.disconnect()  # closes a socket made before the failure
            if _refusals((self._peer, "raft-dial")):
                log.error("Raft port: cannot dial the peer %s: %s%s", self._peer, e, _advice(e))
            return False

    def disconnect(self) -> None:
        self._proven = False
        super().disconnect()

    def _TcpConnection__processRead(self) -> bool:
        """Read once more, unless the first frame buffered is too long (the connection is then
        closed) or whole (parsed before anything more is read)."""
        if not TcpConnection._TcpConnection__processRead(self):  # type: ignore[attr-defined]
            return False
        buffer = self._TcpConnection__readBuffer  # type: ignore[attr-defined]
        if len(buffer) < _LENGTH.size:
            return True
        (size,) = _LENGTH.unpack_from(buffer)
        limit = MAX_FRAME_BYTES if self._proven else HANDSHAKE_FRAME_BYTES
        if not 0 <= size <= limit:
            self._refuse(f"it announced a frame of {size} bytes, over the {limit} accepted")
            return False
        return len(buffer) < _LENGTH.size + size

    def _TcpConnection__processParseMessage(self) -> Any:
        """pysyncobj's parse of the first whole frame; a frame that carried the random key this
        node sent proves the peer (only the password's holder can encrypt it)."""
        challenged = bool(self.recvRandKey)
        message = TcpConnection._TcpConnection__processParseMessage(self)  # type: ignore[attr-defined]
        if message is not None:
            self._proven = self._proven or challenged
        elif self.state == CONNECTION_STATE.DISCONNECTED:
            self._refuse(
                "its frame did not authenticate with the cluster's Raft password, or did not "
                "hold Raft data"
            )
        return message

    def _refuse(self, reason: str) -> None:
        host = self._peer.rpartition(":")[0]
        if _refusals((host, "raft")):
            log.warning(
                "Raft port: dropped the connection of %s: %s. If it is a meta node of this "
                "cluster, give it the same internal.secret as this node",
                self._peer,
                reason,
            )
        if self.state != CONNECTION_STATE.DISCONNECTED:
            self.disconnect()


class GuardedServer(TcpServer):
    """pysyncobj's listener, which listens on whatever fails (meta.raft makes pysyncobj build
    these instead of its own): a failed accept pauses it, a connection over the unproven bound
    is closed at once, one unproven for HANDSHAKE_TIMEOUT_S is dropped (`tick`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unproven_limit = UNPROVEN_PER_PEER  # GuardedTransport sets it for its peers
        self._unproven: dict[GuardedConnection, float] = {}  # -> when it must have proved
        self._paused_until: float | None = None
        self._failures = 0  # accepts failed in a row

    def bind(self) -> None:
        """pysyncobj's bind, with a listen backlog that takes a flood's connections to be
        closed, rather than dropping every connection attempt past 5 (a peer's among them,
        which then waits seconds for the kernel to try again)."""
        super().bind()
        self._TcpServer__socket.listen(_BACKLOG)  # type: ignore[attr-defined]

    def _TcpServer__onNewConnection(self, descr: int, event: int) -> None:
        """Accept what is pending; pause on a failure, or on an error event of the socket."""
        if event & POLL_EVENT_TYPE.ERROR:
            self._accept_failed(OSError(errno.EIO, "error event on the listening socket"))
            return
        for _ in range(_ACCEPTS_PER_EVENT):
            try:
                sock, _address = self._TcpServer__socket.accept()  # type: ignore[attr-defined]
            except BlockingIOError:
                return
            except OSError as e:
                self._accept_failed(e)
                return
            if self._failures:
                log.info("Raft port: accepting connections again (%d failed)", self._failures)
                self._failures = 0
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        """Hand an accepted connection to pysyncobj, unless the unproven bound is reached."""
        self._expire(monotonic_time())
        if len(self._unproven) >= self.unproven_limit:
            peer = _peer_of(sock)
            sock.close()
            if _refusals((peer.rpartition(":")[0], "raft-unproven")):
                log.warning(
                    "Raft port: closed a connection of %s at once: %d connections have not "
                    "proved the cluster's Raft password yet, the most this node holds (%d per "
                    "peer). If no meta node of this cluster runs there, keep it from the Raft "
                    "port: only the meta nodes need to reach it",
                    peer,
                    len(self._unproven),
                    UNPROVEN_PER_PEER,
                )
            return
        try:
            for option, value in (
                (socket.SO_SNDBUF, self._TcpServer__sendBufferSize),  # type: ignore[attr-defined]
                (socket.SO_RCVBUF, self._TcpServer__recvBufferSize),  # type: ignore[attr-defined]
            ):
                sock.setsockopt(socket.SOL_SOCKET, option, value)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conn = GuardedConnection(
                poller=self._TcpServer__poller,  # type: ignore[attr-defined]
                socket=sock,
                timeout=self._TcpServer__connectionTimeout,  # type: ignore[attr-defined]
                sendBufferSize=self._TcpServer__sendBufferSize,  # type: ignore[attr-defined]
                recvBufferSize=self._TcpServer__recvBufferSize,  # type: ignore[attr-defined]
                keepalive=self._TcpServer__keepalive,  # type: ignore[attr-defined]
            )
        except OSError:  # the peer is gone already (reset)
            sock.close()
            return
        self._unproven[conn] = monotonic_time() + HANDSHAKE_TIMEOUT_S
        self._TcpServer__onNewConnectionCallback(conn)  # type: ignore[attr-defined]

    def _accept_failed(self, error: OSError) -> None:
        """Stop listening for _ACCEPT_BACKOFF_S (`tick` listens again), logging the first
        failure in a row and every _FAILURES_LOGGED_EVERY-th."""
        self._failures += 1
        if self._failures == 1 or self._failures % _FAILURES_LOGGED_EVERY == 0:
            log.error(
                "Raft port: cannot accept connections (%d failure(s) in a row): %s%s; the peers "
                "already connected are served meanwhile, and accepting is tried again every "
                "%gs",
                self._failures,
                error,
                _advice(error),
                _ACCEPT_BACKOFF_S,
            )
        fileno = self._TcpServer__fileno  # type: ignore[attr-defined]
        if fileno is not None:
            self._TcpServer__poller.unsubscribe(fileno)  # type: ignore[attr-defined]
        self._paused_until = monotonic_time() + _ACCEPT_BACKOFF_S

    def tick(self) -> None:
        """On each Raft tick: listen again once a pause is over; drop the connections whose
        time to prove the password ran out."""
        now = monotonic_time()
        fileno = self._TcpServer__fileno  # type: ignore[attr-defined]
        if self._paused_until is not None and now >= self._paused_until:
            self._paused_until = None
            if fileno is not None:  # still bound
                self._TcpServer__poller.subscribe(  # type: ignore[attr-defined]
                    fileno,
                    self._TcpServer__onNewConnection,
                    POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR,
                )
        self._expire(now)

    def _expire(self, now: float) -> None:
        """Forget the connections that proved the password or closed; drop those whose time
        to prove it ran out."""
        for conn, deadline in list(self._unproven.items()):
            if conn.proven or conn.state == CONNECTION_STATE.DISCONNECTED:
                del self._unproven[conn]
            elif now >= deadline:
                del self._unproven[conn]
                conn._refuse(
                    f"it did not prove the cluster's Raft password within {HANDSHAKE_TIMEOUT_S:g}s"
                )


class GuardedTransport(TCPTransport):
    """pysyncobj's TCP transport with a `GuardedServer` (pysyncobj.transport builds it, as
    meta.raft has it), bounded to UNPROVEN_PER_PEER unproven connections per peer and ticked;
    and no message on a connection this node dialled before the peer's key came back.

    pysyncobj calls a dialled connection connected once its socket is, one round trip before
    the key exchange is over, and sends on it meanwhile (a vote request at start-up, an
    AppendEntries): such a message went out without the peer's key, the peer dropped the
    connection as one that did not authenticate, and the quorum lost a connection (often an
    election) at start. `send` reports such a message not sent instead, as it does for a peer
    not connected: pysyncobj sends it again."""

    def send(self, node: Any, message: Any) -> bool:
        conn = self._connections.get(node)
        if conn is not None and conn.encryptor is not None and not conn.sendRandKey:
            return False  # a connection this node dialled, its key exchange not over
        return bool(super().send(node, message))

    def _createServer(self) -> None:
        super()._createServer()
        if isinstance(self._server, GuardedServer):
            self._server.unproven_limit = UNPROVEN_PER_PEER * max(1, len(self._nodes))

    def _onTick(self) -> None:
        if isinstance(self._server, GuardedServer):
            self._server.tick()  # first: pysyncobj's part may raise
        super()._onTick()


def _advice(error: OSError) -> str:
    """What to do about ``error``, for a log line ("" if nothing)."""
    if error.errno in (errno.EMFILE, errno.ENFILE):
        return (
            "; the meta node is out of file descriptors: raise its open-files limit (ulimit -n, "
            "LimitNOFILE= under systemd; it raises its soft limit to the hard limit at start) "
            "or the system's (fs.file-max), or find who holds them (a flood of connections?)"
        )
    if error.errno in (errno.ENOMEM, errno.ENOBUFS):
        return "; the meta node is out of memory: give it more"
    return ""


def _peer_of(sock: socket.socket) -> str:
    """host:port of an accepted connection's peer (for logs; "?" if it is gone already)."""
    try:
        host, port, *_ = sock.getpeername()  # an IPv6 address has two more fields
    except OSError:
        return "?"
    return f"{host}:{port}"
