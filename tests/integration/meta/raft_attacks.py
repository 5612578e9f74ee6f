"""Hostile peers of a meta node's Raft port (meta/raft_port.py), for tests.

pysyncobj's transport reads frames of a native signed 32-bit length followed by that many
bytes: a zlib-compressed pickle, Fernet-encrypted with the Raft password when the node has one
(``InternalSecurity.raft_password``). Any Raft port serves: ``MetaNodes.raft_address(i)``, or
``127.0.0.1:<base_port + 200 + i>`` for meta node i + 1 of a ``LocalCluster``.
"""

from __future__ import annotations

import errno
import pickle
import socket
import struct
import time
import zlib
from pathlib import Path

from pysyncobj.encryptor import getEncryptor

_LENGTH = struct.Struct("i")
_CHUNK = bytes(1 << 20)


class _CreatesFile:
    """Unpickled, it creates ``path`` (and does nothing else): proof that a pickle ran."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.path), "w")


def code_running_frame(marker: Path, password: str | None = None) -> bytes:
    """A frame whose unpickling creates ``marker``; encrypted with ``password`` as a peer who
    knows it would send it (None: in clear, as to a node without a password)."""
    data = zlib.compress(pickle.dumps(_CreatesFile(marker), protocol=2), 3)
    if password is not None:
        data = getEncryptor(password).encrypt(data)
    return _LENGTH.pack(len(data)) + data


def send_frame(address: str, frame: bytes, timeout_s: float = 10.0) -> bool:
    """Send ``frame`` on a new connection; True once the node has closed it (within
    ``timeout_s``), False if it is still open then."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(frame)
        try:
            while time.monotonic() < deadline:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                if not sock.recv(1 << 16):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            pass
    return False


def announce_oversized_frame(
    address: str, announced: int = 2**31 - 1, budget: int = 256 << 20, timeout_s: float = 20.0
) -> int:
    """Announce a frame of ``announced`` bytes (2 GiB - 1: the largest length pysyncobj reads)
    and stream zeros after it until the node closes the connection. Returns the bytes sent
    before it did; AssertionError if it still reads after ``budget`` bytes or ``timeout_s``."""
    host, port = address.rsplit(":", 1)
    sent = 0
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        try:
            sock.sendall(_LENGTH.pack(announced))
            while sent < budget and time.monotonic() < deadline:
                sock.sendall(_CHUNK)
                sent += len(_CHUNK)
        except (ConnectionResetError, BrokenPipeError):
            return sent
        except TimeoutError:
            pass  # the node neither reads nor closes: as bad
    raise AssertionError(
        f"the Raft port {address} did not close a connection announcing a frame of {announced} "
        f"bytes: {sent} bytes sent after it"
    )


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def open_connections(address: str, count: int) -> list[socket.socket]:
    """``count`` connections to ``address`` that send nothing, opened without waiting (a node
    that does not accept leaves them in its listen backlog, or unanswered)."""
    host, port = address.rsplit(":", 1)
    flood = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex((host, int(port)))
        flood.append(sock)
    return flood


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the node closed a connection of `open_connections` (False while it is open or
    still connecting)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    except OSError as e:  # ENOTCONN: not connected yet
        return e.errno != errno.ENOTCONN and e.errno != errno.EAGAIN
