"""Run one meta node: ``run_meta_node(config)``, or ``python -m meta.node --override key=value``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from common.internal_security import InternalSecurity, InternalSecurityError
from meta import metrics, quorum
from meta.config import MetaConfig
from meta.feed import ChangeFeed
from meta.journal import JournalError, StateDumpError
from meta.leases import BrokerLeases
from meta.quorum import Member
from meta.quorum_service import QuorumAgent
from meta.raft import MetaRaft, RaftPasswordError, RaftStartError
from meta.service import MetaService
from proto import meta_pb2_grpc

log = logging.getLogger("rafka.meta.node")

_SERVER_OPTIONS = [
    ("grpc.so_reuseport", 0),  # a second process on the same port must fail, not share it
    ("grpc.keepalive_permit_without_calls", 1),  # clients ping idle channels (see meta.client)
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
]
_SHUTDOWN_GRACE_S = 2.0
# The main thread wakes this often to run Python signal handlers: a SIGTERM taken by another
# thread (gRPC's, pysyncobj's) only flags the handler for the main thread, which must then
# execute bytecode to run it; blocked in an untimed wait it would sleep through the signal.
_SIGNAL_CHECK_S = 0.2


class MetaStartupError(RuntimeError):
    """The node cannot start; the message says why and what to do about it."""


class MetaFailedError(RuntimeError):
    """The running node had to stop; the message says why and what to do about it."""


class MetaServer:
    """One meta node: its Raft member, gRPC API and leader duties, started and stopped together."""

    def __init__(self, config: MetaConfig) -> None:
        self.config = config

    def start(self) -> None:
        config = self.config
        data_dir = _prepare_data_dir(config.meta_data_dir)
        try:
            security = InternalSecurity.from_config(config)
        except InternalSecurityError as exc:
            raise MetaStartupError(str(exc)) from exc
        self._server = grpc.server(
            ThreadPoolExecutor(config.meta_server_threads, thread_name_prefix="meta-grpc"),
            interceptors=security.server_interceptors(asynchronous=False),
            options=_SERVER_OPTIONS,
        )
        try:
            security.add_port(self._server, config.meta_listener)
        except RuntimeError as exc:
            raise MetaStartupError(
                f"cannot listen on meta.listener {config.meta_listener}: the port is in use or "
                "the address is not local; stop the other process or change meta.listener"
            ) from exc
        feed = ChangeFeed(config.meta_watch_buffer_size)
        leases = BrokerLeases(config.broker_session_timeout_ms / 1000)
        voters = config.voters()
        listeners = config.grpc_addresses()
        try:
            identity = Member(
                config.node_id,
                config.raft_address(),
                config.own_grpc_address(),
                quorum.directory_id(data_dir, config.node_id),
            )
        except quorum.DirectoryError as exc:
            raise MetaStartupError(str(exc)) from exc
        bootstrap = [
            Member(node, address, listeners.get(node, "")) for node, address in voters.items()
        ]
        try:
            self._raft = MetaRaft(
                identity.raft_address,
                [address for node, address in voters.items() if node != config.node_id],
                data_dir,
                feed,
                config.meta_write_timeout_ms / 1000,
                on_leadership=leases.clear,
                password=security.raft_password,
                identity=identity,
                bootstrap=bootstrap,
            )
        except RaftStartError as exc:
            raise MetaStartupError(
                f"{exc}: the port is in use or the host is not this machine; stop the other "
                f"process or fix node {config.node_id}'s entry in meta.quorum.voters"
            ) from exc
        except RaftPasswordError as exc:
            raise MetaStartupError(
                f"meta.quorum.voters names {len(voters)} meta nodes but internal.secret is not "
                f"set ({exc}, and run code on them): set internal.secret, 16 characters or "
                "more and the same on every meta node and broker (e.g. `openssl rand -hex 32`); "
                "`rafka up` and the Helm chart set one"
            ) from exc
        except (JournalError, StateDumpError) as exc:
            raise MetaStartupError(
                f"{exc}: meta.data.dir holds something else or damaged Raft data; restore the "
                "data dir from a backup, or, if the other meta nodes are up, move it aside (keep "
                "it for analysis) and start this node with an empty one to let it catch up from "
                "them"
            ) from exc
        metrics.serve(config.meta_metrics_port, self._raft.status, voters)
        self._service = MetaService(config, self._raft, feed, leases)
        meta_pb2_grpc.add_MetaServiceServicer_to_server(self._service, self._server)
        self._agent = QuorumAgent(self._raft, security, bootstrap)
        self._service.start()
        self._server.start()
        self._agent.start()
        log.info(
            "Meta node %d started: gRPC on %s, Raft on %s (%s; voters %s), data in %s "
            "(directory id %s); internal traffic secured by %s",
            config.node_id,
            config.meta_listener,
            identity.raft_address,
            "an observer" if self._raft.observer else "a voter",
            ", ".join(f"{m.node_id}@{m.raft_address}" for m in self._raft.members()),
            data_dir,
            identity.directory_id,
            security.describe(),
        )
        security.warn_if_open(
            f"Meta node {config.node_id}", f"its gRPC port {config.meta_listener}"
        )

    @property
    def failure(self) -> str | None:
        """Why the node must stop (its Raft member cannot go on), if it must."""
        return self._raft.failure

    def stop(self) -> None:
        stopped = self._server.stop(_SHUTDOWN_GRACE_S)  # refuse new RPCs, let others finish
        self._agent.stop()
        self._service.stop()  # ends Watch streams
        stopped.wait()
        self._raft.destroy()
        log.info("Meta node %d stopped", self.config.node_id)


def _prepare_data_dir(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise MetaStartupError(
            f"meta.data.dir {path} is not writable ({exc.strerror}); fix its permissions or "
            "point meta.data.dir elsewhere"
        ) from exc
    return path


def run_meta_node(config: MetaConfig) -> None:
    """Run one meta node until SIGTERM or SIGINT, then shut it down cleanly.

    Must be called from the main thread (it installs signal handlers). Raises MetaStartupError,
    after logging it, when the node cannot start, and MetaFailedError once it has stopped
    because it could not go on (`MetaServer.failure`, logged by the Raft member).
    """
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        node = MetaServer(config)
        try:
            node.start()
        except MetaStartupError as exc:
            log.error("Meta node %d cannot start: %s", config.node_id, exc)
            raise
        while not stop.wait(_SIGNAL_CHECK_S) and node.failure is None:
            pass
        if node.failure is not None:
            log.error("Meta node %d stops: its Raft member cannot go on", config.node_id)
            node.stop()
            raise MetaFailedError(node.failure)
        log.info("Meta node %d shutting down", config.node_id)
        node.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> None:
    """Minimal command line, for tests and local runs (the ``rafka`` CLI is the real one)."""
    parser = argparse.ArgumentParser(prog="python -m meta.node", description="Run a meta node.")
    parser.add_argument("--properties", type=Path, help="a Java .properties file of settings")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting under its Kafka name, e.g. node.id=2 (repeatable)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s"
    )
    if bad := [item for item in args.override if "=" not in item]:
        parser.error(f"--override needs KEY=VALUE, got {bad[0]!r}")
    overrides = dict(item.split("=", 1) for item in args.override)
    try:
        config = MetaConfig.load(args.properties, overrides)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        run_meta_node(config)
    except (MetaStartupError, MetaFailedError):
        sys.exit(1)


if __name__ == "__main__":
    main()
