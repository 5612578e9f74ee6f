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

The password itself is the authentication (`meta.raft.MetaRaft` never runs Raft without one):
Fernet checks a frame's HMAC before anything is decrypted or unpickled. As a second line,
every pickle pysyncobj or this service loads (frames, log entries, state dumps) goes through
`loads`, which builds only the classes Raft data holds (`_RestrictedUnpickler`): a pickle that
would call anything else is refused before it runs.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import logging
import pickle
import socket
import struct
from typing import IO, Any

from pysyncobj.pickle import to_bytes
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

from cluster.internal_security import RefusalLimiter

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

    def connect(self, host: str, port: int) -> bool:
        self._proven = False
        self._peer = f"{host}:{port}"
        return bool(super().connect(host, port))

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


def _peer_of(sock: socket.socket) -> str:
    """host:port of an accepted connection's peer (for logs; "?" if it is gone already)."""
    try:
        host, port, *_ = sock.getpeername()  # an IPv6 address has two more fields
    except OSError:
        return "?"
    return f"{host}:{port}"
