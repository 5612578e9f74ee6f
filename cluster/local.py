"""A local cluster of separate meta and broker processes, for `rafka up` and for tests.

Port layout from --base-port B (default 9092), node i counted from 0:
  broker i Kafka listener      B + i          (9092, 9093, 9094)
  meta i gRPC                  B + 100 + i    (9192, ...)
  meta i Raft                  B + 200 + i    (9292, ...)
  broker i replication gRPC    B + 300 + i    (9392, ...)
Each node gets a properties file under <data-dir>/config and a log under <data-dir>/logs.

`security_protocol` sets the protocol of the brokers' listener, also its listener name (so
``listener.name.sasl_ssl.*`` settings apply to it, as in Kafka). SSL and SASL_SSL without a
keystore setting use a development CA and broker certificates under <data-dir>/tls
(common/dev_ca.py); clients trust `ca_path`.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import dev_ca
from common.internal_security import InternalSecurity, local_cluster_credentials
from dataplane.config import BrokerConfig
from dataplane.security.listeners import SECURITY_PROTOCOLS, TLS_PROTOCOLS
from meta.client import MetaClient
from meta.config import MetaConfig

log = logging.getLogger("rafka.cluster")


@dataclass
class Node:
    name: str
    kind: str  # "meta" or "broker"
    config_file: Path
    log_file: Path
    port: int  # the port that tells the node is up (Kafka or gRPC)
    host: str = "127.0.0.1"  # the address it binds and is dialled at
    command_prefix: list[str] = field(default_factory=list)  # e.g. ip netns exec NS
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's environment
    proc: subprocess.Popen | None = field(default=None, repr=False)


class LocalCluster:
    def __init__(
        self,
        brokers: int = 3,
        metas: int = 3,
        data_dir: Path = Path("./data"),
        base_port: int = 9092,
        overrides: dict[str, str] | None = None,
        log_level: str = "INFO",
        internal_tls: bool = False,
        security_protocol: str = "PLAINTEXT",
        hosts: Mapping[str, str] | None = None,
        node_overrides: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """``internal_tls``: TLS with client certificates on the meta and replication gRPC,
        besides the cluster secret every local cluster gets (on with an SSL or SASL_SSL
        ``security_protocol`` anyway). ``hosts``: the address of each node by name
        (``meta-1``, ``broker-2``; default 127.0.0.1), e.g. one network namespace each;
        ``node_overrides``: settings of one node only, by name (e.g. its ``log.dirs``)."""
        self.data_dir = data_dir.resolve()
        self.base_port = base_port
        self.log_level = log_level
        self.security_protocol = security_protocol.upper()
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"unknown security protocol {security_protocol!r}; "
                f"use one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        overrides = overrides or {}
        broker_keys = {
            k
            for k in overrides
            if k.replace(".", "_") in BrokerConfig.model_fields
            or k.startswith(BrokerConfig.PREFIXES)
        }
        meta_keys = {k for k in overrides if k.replace(".", "_") in MetaConfig.model_fields}
        unknown = set(overrides) - broker_keys - meta_keys
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        hosts = hosts or {}
        node_overrides = node_overrides or {}
        meta_hosts = [hosts.get(f"meta-{i + 1}", "127.0.0.1") for i in range(metas)]
        meta_grpc = [f"{meta_hosts[i]}:{base_port + 100 + i}" for i in range(metas)]
        voters = ",".join(f"{i + 1}@{meta_hosts[i]}:{base_port + 200 + i}" for i in range(metas))
        listeners = ",".join(f"{i + 1}@{addr}" for i, addr in enumerate(meta_grpc))
        self.nodes: dict[str, Node] = {}
        # The development CA, when the brokers' certificates are ours to make.
        self.ca_path: Path | None = None
        if self.security_protocol in TLS_PROTOCOLS and not _has_keystore(
            overrides, self.security_protocol
        ):
            self.ca_path = dev_ca.ensure_ca(dev_ca.tls_dir(self.data_dir))
        # Never open: fresh internal credentials, also in internal.properties for admin tools.
        self.internal_properties = local_cluster_credentials(
            self.data_dir, internal_tls or self.security_protocol in TLS_PROTOCOLS
        )
        self.internal_properties_file = self.data_dir / "internal.properties"
        for i in range(metas):
            props = (
                {
                    "node.id": i + 1,
                    "meta.listener": meta_grpc[i],
                    "meta.quorum.voters": voters,
                    "meta.quorum.listeners": listeners,
                    "meta.data.dir": self.data_dir / f"meta-{i + 1}",
                }
                | self.internal_properties
                | {k: overrides[k] for k in meta_keys}
                | dict(node_overrides.get(f"meta-{i + 1}", {}))
            )
            self._add(f"meta-{i + 1}", "meta", props, base_port + 100 + i, meta_hosts[i])
        for i in range(brokers):
            host = hosts.get(f"broker-{i + 1}", "127.0.0.1")
            props = (
                {
                    "node.id": i + 1,
                    "listeners": f"{self.security_protocol}://{host}:{base_port + i}",
                    "replication.listener": f"{host}:{base_port + 300 + i}",
                    "log.dirs": self.data_dir / f"broker-{i + 1}",
                    "meta.bootstrap.servers": ",".join(meta_grpc),
                }
                | replication_factors(brokers)
                | self.internal_properties
                | self._broker_certificate(i + 1)
                | {k: overrides[k] for k in broker_keys}
                | dict(node_overrides.get(f"broker-{i + 1}", {}))
            )
            self._add(f"broker-{i + 1}", "broker", props, base_port + i, host)

    def _broker_certificate(self, node_id: int) -> dict[str, Path]:
        """The keystore setting of a broker's development certificate (none without the CA)."""
        if self.ca_path is None:
            return {}
        path = dev_ca.ensure_broker_certificate(self.ca_path.parent, node_id)
        return {"ssl.keystore.location": path}

    def _add(self, name: str, kind: str, props: dict, port: int, host: str = "127.0.0.1") -> None:
        config_file = self.data_dir / "config" / f"{name}.properties"
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.touch(mode=0o600)  # it holds secrets (internal.secret, JAAS passwords)
        config_file.chmod(0o600)
        config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log_file = self.data_dir / "logs" / f"{name}.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self.nodes[name] = Node(name, kind, config_file, log_file, port, host)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.nodes.values() if n.kind == "broker")

    @property
    def client_config(self) -> dict[str, str]:
        """What a Kafka client needs to connect (SASL credentials aside), Kafka's names."""
        config = {"bootstrap.servers": self.bootstrap}
        if self.security_protocol != "PLAINTEXT":
            config["security.protocol"] = self.security_protocol
        if self.ca_path is not None:
            config["ssl.ca.location"] = str(self.ca_path)
        return config

    @property
    def meta_servers(self) -> list[str]:
        return [f"{n.host}:{n.port}" for n in self.nodes.values() if n.kind == "meta"]

    def meta_client(self, **kwargs: Any) -> MetaClient:
        """A MetaClient of this cluster's meta service, with its internal credentials."""
        security = InternalSecurity.from_properties(self.internal_properties)
        return MetaClient(self.meta_servers, security=security, **kwargs)

    # -- process control -----------------------------------------------------------------------

    def start_node(self, name: str) -> None:
        node = self.nodes[name]
        if node.proc is not None and node.proc.poll() is None:
            return
        cmd = [
            *node.command_prefix,
            sys.executable,
            "-m",
            "cluster.cli",
            node.kind,
            "--config",
            str(node.config_file),
            "--log-level",
            self.log_level,
        ]
        with node.log_file.open("ab") as out:
            node.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=os.environ | {"PYTHONUNBUFFERED": "1"} | node.env,
                start_new_session=True,
            )

    def signal_node(self, name: str, sig: int) -> None:
        proc = self.nodes[name].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill(self, name: str) -> None:
        """kill -9, as a crash would."""
        self.signal_node(name, signal.SIGKILL)
        proc = self.nodes[name].proc
        if proc is not None:
            proc.wait()

    def stop_node(self, name: str, timeout: float = 30.0) -> None:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        proc = self.nodes[name].proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %.0fs; killing it", name, timeout)
            proc.kill()
            proc.wait()

    def start(self, timeout: float = 60.0) -> None:
        for name, node in self.nodes.items():
            if node.kind == "meta":
                self.start_node(name)
        for name, node in self.nodes.items():
            if node.kind == "broker":
                self.start_node(name)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0, names: list[str] | None = None) -> None:
        """Poll until every (named) node accepts TCP connections on its main port."""
        deadline = time.monotonic() + timeout
        for name in names or list(self.nodes):
            node = self.nodes[name]
            while not _port_open(node.host, node.port):
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {node.proc.returncode}; see {node.log_file}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{name} not ready after {timeout:.0f}s; see {node.log_file}"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        """Brokers first (they hand leadership away), then the meta nodes."""
        for kind in ("broker", "meta"):
            for name, node in self.nodes.items():
                if node.kind == kind:
                    self.signal_node(name, signal.SIGTERM)
            for name, node in self.nodes.items():
                if node.kind == kind:
                    self.stop_node(name)

    def run(self) -> None:
        """`rafka up`: start, report, and stop everything on Ctrl-C/SIGTERM or a node's death."""
        stop = False

        def _stop(signum: int, _frame: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        try:
            self.start()
            print(f"Rafka is up: bootstrap.servers={self.bootstrap}", flush=True)
            if self.security_protocol != "PLAINTEXT":
                print(f"  security.protocol={self.security_protocol}", flush=True)
            if self.ca_path is not None:
                print(f"  CA certificate (clients' ssl.ca.location): {self.ca_path}", flush=True)
            print(f"  meta service: {','.join(self.meta_servers)}", flush=True)
            print(
                f"  internal credentials (admin commands' --command-config): "
                f"{self.internal_properties_file}",
                flush=True,
            )
            print(f"  data: {self.data_dir}   logs: {self.data_dir / 'logs'}", flush=True)
            print("  Ctrl-C stops the cluster.", flush=True)
            while not stop:
                for name, node in self.nodes.items():
                    if node.proc is not None and node.proc.poll() is not None:
                        log.error(
                            "%s exited with code %s; see %s",
                            name,
                            node.proc.returncode,
                            node.log_file,
                        )
                        node.proc = None
                time.sleep(0.2)
        finally:
            print("stopping Rafka...", flush=True)
            self.stop()
            print("stopped.", flush=True)


def replication_factors(brokers: int) -> dict[str, int]:
    """Replicas of a local cluster's topics: min(3, brokers), the internal topics' too (Kafka
    creates those with their configured factor only, 3 by default, once that many brokers are
    up: a one-broker cluster would have no group or transaction coordinator otherwise)."""
    factor = min(3, brokers)
    return {
        "default.replication.factor": factor,
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "share.coordinator.state.topic.replication.factor": factor,
    }


def _has_keystore(overrides: dict[str, str], listener: str) -> bool:
    """Whether the settings name the brokers' own certificate (broker-wide or per listener)."""
    names = ("ssl.keystore.location", "ssl.keystore.certificate.chain")
    prefix = f"listener.name.{listener.lower()}."
    return any(overrides.get(n) or overrides.get(prefix + n) for n in names)


def free_base_port(brokers: int = 3, metas: int = 3) -> int:
    """A base port whose whole layout (module docstring) is free right now: for tests and
    benchmarks that run clusters side by side."""
    for _ in range(200):
        # Below Linux's ephemeral range (32768-60999): a port picked there can be handed to
        # some client connection's local end before the node binds it.
        base = random.randrange(10000, 32768 - 400, 10)
        ports = [
            base + offset + i
            for offset, count in ((0, brokers), (100, metas), (200, metas), (300, brokers))
            for i in range(count)
        ]
        if all(_bindable(p) for p in ports):
            return base
    raise RuntimeError("no free port range found")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0
