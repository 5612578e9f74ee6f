"""The Raft port's listener (meta/raft_port.py `GuardedServer`), driven by hand on a real socket
and pysyncobj's poller: a failed accept (out of descriptors) pauses it and it listens on, a
connection over the unproven bound is closed at once, one that does not prove the password in
time is dropped; a dial without a descriptor fails instead of raising through pysyncobj; and a
Raft message waits for the key exchange of a connection just dialled (`GuardedTransport`).

(The same on real meta nodes, flooded and out of descriptors: the integration test
tests/integration/meta/test_raft_port.py.)"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator

import pytest
from pysyncobj.config import SyncObjConf
from pysyncobj.encryptor import getEncryptor
from pysyncobj.node import TCPNode
from pysyncobj.poller import PollPoller
from pysyncobj.tcp_connection import CONNECTION_STATE

import meta.raft  # pysyncobj builds the guarded connections and listener from here on
import meta.raft_port
from common.internal_security import RefusalLimiter
from meta.raft_port import GuardedConnection, GuardedServer, GuardedTransport
from tests.integration.conftest import wait_for
from tests.integration.meta.harness import free_ports
from tests.integration.meta.raft_attacks import closed_by_peer, open_connections
from tests.unit.log.helpers import descriptors_left


class Listener:
    """A GuardedServer on a free local port, its connections as pysyncobj gets them."""

    def __init__(self) -> None:
        self.poller = PollPoller()
        self.address = f"127.0.0.1:{free_ports(1)[0]}"
        host, port = self.address.rsplit(":", 1)
        self.accepted: list[GuardedConnection] = []
        self.server = GuardedServer(self.poller, host, port, self.accepted.append)
        self.server.bind()

    def run_until(self, done: Callable[[], object], what: str) -> None:
        """Raft ticks (a poll, then the server's tick) until ``done()`` holds."""

        def tick() -> object:
            self.poller.poll(0.01)
            self.server.tick()
            return done()

        wait_for(tick, 10, what)


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    monkeypatch.setattr(meta.raft_port, "_refusals", RefusalLimiter())  # a first line each
    made = Listener()
    yield made
    for conn in made.accepted:
        conn.disconnect()
    made.server.unbind()


def test_a_failed_accept_pauses_the_listener_and_it_listens_on(
    listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    clients = [socket.socket() for _ in range(3)]  # their descriptors before none is left
    with descriptors_left(0), caplog.at_level(logging.ERROR, "rafka.meta.raft"):
        host, port = listener.address.rsplit(":", 1)
        for client in clients:
            client.setblocking(False)
            client.connect_ex((host, int(port)))
        listener.run_until(lambda: caplog.records, "a failed accept")
    (failure,) = [r.getMessage() for r in caplog.records]
    assert "Raft port: cannot accept connections (1 failure(s) in a row)" in failure
    assert "out of file descriptors: raise its open-files limit" in failure
    listener.run_until(lambda: len(listener.accepted) == 3, "the pending connections accepted")
    for client in clients:
        client.close()


def test_connections_over_the_unproven_bound_are_closed_at_once(
    listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    listener.server.unproven_limit = 2
    with caplog.at_level(logging.WARNING, "rafka.meta.raft"):
        flood = open_connections(listener.address, 6)
        listener.run_until(lambda: sum(map(closed_by_peer, flood)) == 4, "4 closed at once")
    assert len(listener.accepted) == 2
    assert not any(closed_by_peer(sock) for sock in flood[:2])
    (warning,) = [r.getMessage() for r in caplog.records]  # once a minute, however many
    assert "2 connections have not proved the cluster's Raft password yet" in warning
    for sock in flood:
        sock.close()


def test_a_connection_that_does_not_prove_the_password_in_time_is_dropped(
    listener: Listener, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(meta.raft_port, "HANDSHAKE_TIMEOUT_S", 0.3)
    (sock,) = open_connections(listener.address, 1)
    with caplog.at_level(logging.WARNING, "rafka.meta.raft"):
        listener.run_until(lambda: closed_by_peer(sock), "the silent connection dropped")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "did not prove the cluster's Raft password within 0.3s" in warning
    sock.close()


def test_a_dial_without_a_descriptor_is_logged_not_raised(
    listener: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    """pysyncobj's dial raises through its tick when no socket can be made (out of
    descriptors); the connection fails it instead, and is dialled again later."""
    host, port = listener.address.rsplit(":", 1)
    conn = GuardedConnection(poller=listener.poller)
    with descriptors_left(0), caplog.at_level(logging.ERROR, "rafka.meta.raft"):
        assert not conn.connect(host, int(port))
    (failure,) = [r.getMessage() for r in caplog.records]
    assert f"Raft port: cannot dial the peer {listener.address}: [Errno 24]" in failure
    assert conn.connect(host, int(port))  # descriptors free again
    conn.disconnect()


class _Node:
    """What pysyncobj's TCPTransport reads of its SyncObj (one Raft node of the test)."""

    def __init__(self, encryptor: object) -> None:
        self.conf = SyncObjConf(password="secret", connectionRetryTime=0.0)
        self._poller = PollPoller()
        self.encryptor = encryptor
        self.ticks: list[Callable[[], None]] = []

    def addOnTickCallback(self, callback: Callable[[], None]) -> None:
        self.ticks.append(callback)


def test_a_message_for_a_peer_waits_for_its_key_exchange(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A node that dials a peer holds a connected socket one round trip before the two have
    exchanged their keys; a Raft message pysyncobj sent then (a vote request at start-up, or
    an AppendEntries) went out without the peer's key, and the peer dropped the connection as
    one that "did not authenticate", which cost an election. The transport now reports such a
    message not sent (pysyncobj sends it again), and the exchange completes."""
    monkeypatch.setattr(meta.raft_port, "_refusals", RefusalLimiter())
    encryptor = getEncryptor("secret")
    low, high = sorted(free_ports(2))
    dialed = TCPNode(f"127.0.0.1:{low}")  # pysyncobj dials from the higher address
    dialer_node = TCPNode(f"127.0.0.1:{high}")
    peer, dialer = _Node(encryptor), _Node(encryptor)
    accepting = GuardedTransport(peer, dialed, [dialer_node])
    dialing = GuardedTransport(dialer, dialer_node, [dialed])
    connected: list[object] = []
    received: list[object] = []
    accepting.setOnNodeConnectedCallback(connected.append)
    accepting.setOnMessageReceivedCallback(lambda node, message: received.append(message))
    accepting.tryGetReady()
    dialing.tryGetReady()

    def run(nodes: list[_Node], done: Callable[[], object], what: str) -> None:
        def tick() -> object:
            for node in nodes:
                node._poller.poll(0.01)
                for callback in node.ticks:
                    callback()
            return done()

        wait_for(tick, 10, what)

    conn = dialing._connections[dialed]
    with caplog.at_level(logging.WARNING, "rafka.meta.raft"):
        run([dialer], lambda: conn.state == CONNECTION_STATE.CONNECTED, "the dial connected")
        assert not conn.sendRandKey  # the peer's key has not come back yet
        assert not dialing.send(dialed, {"type": "request_vote", "term": 1})
        run([peer, dialer], lambda: connected or caplog.records, "the key exchange done")
        assert not [r.getMessage() for r in caplog.records]  # no connection dropped
        assert dialing.send(dialed, {"type": "request_vote", "term": 2})
        run([peer, dialer], lambda: received, "the vote request delivered")
    assert received == [{"type": "request_vote", "term": 2}]
    for transport in (accepting, dialing):
        transport.destroy()
