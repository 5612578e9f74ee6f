"""A Rafka cluster of containers (the ``rafka:dev`` image, deploy/image/) for failover tests.

``ContainerCluster`` has the shape of `cluster.local.LocalCluster` - ``nodes`` (each with a
``kind`` and a ``proc`` whose ``poll()`` says whether it runs), ``bootstrap``, ``meta_servers``,
``data_dir``, ``start_node`` / ``kill`` / ``signal_node`` / ``stop_node`` / ``wait_ready`` /
``stop`` - so the verify harness (cluster/verify: `Workload`, `ClusterView`, the
nemesis's fault functions, the checker) drives it unchanged. Container-only faults come on top:
``pause`` (``docker pause``), ``isolate`` / ``rejoin`` (``docker network disconnect/connect``),
``recreate`` (new containers on the same volumes).

Networking (why two networks; see README "Deploying"):

- ``cluster`` network, *internal*: meta gRPC + Raft, replication gRPC. Every node has a fixed
  IP and an alias (``meta-1``, ``broker-2``...) that exists on this network only; Raft voters,
  ``meta.bootstrap.servers`` and ``advertised.replication.listener`` use the aliases.
- ``client`` network, inter-container traffic off (``enable_icc=false``): it only carries the
  published ports, ``127.0.0.1:<fixed host port>`` -> the node's Kafka port (brokers) or gRPC
  port (meta nodes, for the harness's DescribeCluster). Docker publishes a container's ports
  through its non-internal network, so they survive a disconnect from ``cluster``.
- A broker has one Kafka listener, ``PLAINTEXT://0.0.0.0:9092``, advertised as
  ``PLAINTEXT://127.0.0.1:<its host port>``: the address the test clients (on the host) reach.
  Brokers never dial each other's Kafka listener (replication is gRPC on ``cluster``), so that
  one advertised address is all the tests need. Clients *inside* the Docker network would need
  a second listener (Kafka's INTERNAL/EXTERNAL pattern), which Rafka does not have yet.

So ``isolate`` cuts a broker off from the meta service and the other brokers while the test's
producers stay connected to it, which is what that scenario needs.

Each node's data is a bind-mounted directory ``<data_dir>/<node>`` (the image's
/var/lib/rafka volume), so the checker reads the replicas' logs from the host, as it does for
a LocalCluster, and a stopped cluster starts again from it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors
import grpc
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from cluster.local import free_base_port
from cluster.verify.workload.produce import supported_apis
from dataplane.config import BrokerConfig
from meta.config import MetaConfig

log = logging.getLogger("containers.cluster")

IMAGE = os.environ.get("RAFKA_TEST_IMAGE", "rafka:dev")
LABEL = "rafka.test"  # on every container and network these tests create
KAFKA_PORT, META_PORT, RAFT_PORT, REPLICATION_PORT = 9092, 9192, 9292, 9392


class _ContainerProc:
    """What the chaos harness asks of a node's ``proc``: ``poll()`` is None while it runs
    (a paused container counts as running, like a SIGSTOPped process)."""

    def __init__(self, node: ContainerNode) -> None:
        self._node = node

    def poll(self) -> int | None:
        c = self._node.container
        if c is None:
            return -1
        try:
            c.reload()
        except docker.errors.NotFound:
            return -1
        if c.status in ("running", "paused", "restarting"):
            return None
        return int(c.attrs["State"].get("ExitCode", -1))


@dataclass
class ContainerNode:
    name: str  # meta-1, broker-2: its alias on the cluster network (not its hostname: Docker
    # makes a hostname an alias on the network the container is created on, here the client one)
    kind: str  # "meta" or "broker"
    node_id: int
    ip: str  # fixed, on the cluster network
    host_port: int  # published on 127.0.0.1: Kafka (broker) or meta gRPC (meta)
    env: dict[str, str]
    data: Path  # bind-mounted at /var/lib/rafka
    config_file: Path  # mounted read-only at /etc/rafka/<kind>.properties
    log_file: Path
    container: docker.models.containers.Container | None = field(default=None, repr=False)

    @property
    def proc(self) -> _ContainerProc | None:
        return None if self.container is None else _ContainerProc(self)

    @property
    def port(self) -> int:  # LocalCluster's name for it
        return self.host_port


class ContainerCluster:
    """3 meta + 3 broker containers (by default) on two Docker networks; see the module doc."""

    def __init__(
        self,
        run_dir: Path,
        brokers: int = 3,
        metas: int = 3,
        overrides: dict[str, str] | None = None,
        image: str = IMAGE,
    ) -> None:
        self.data_dir = run_dir.resolve()
        self.image = image
        self.run_id = f"{os.getpid()}-{random.randrange(16**6):06x}"
        self._docker = docker.from_env(timeout=120)
        overrides = overrides or {}
        broker_keys = {k for k in overrides if k.replace(".", "_") in BrokerConfig.model_fields}
        meta_keys = {k for k in overrides if k.replace(".", "_") in MetaConfig.model_fields}
        if unknown := set(overrides) - broker_keys - meta_keys:
            raise ValueError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        self._client_net, self._cluster_net, subnet = self._create_networks()
        base = free_base_port(brokers, metas)
        voters = ",".join(f"{i}@meta-{i}:{RAFT_PORT}" for i in range(1, metas + 1))
        grpc_listeners = ",".join(f"{i}@meta-{i}:{META_PORT}" for i in range(1, metas + 1))
        self.nodes: dict[str, ContainerNode] = {}
        # As LocalCluster: a fresh cluster secret, never open ports.
        self.internal_properties = {"internal.secret": secrets.token_hex(32)}
        for i in range(1, metas + 1):
            self._add(
                f"meta-{i}",
                "meta",
                i,
                f"{subnet}.{10 + i}",
                base + 100 + i - 1,
                {
                    "RAFKA_NODE_ID": str(i),
                    "RAFKA_META_LISTENER": f"0.0.0.0:{META_PORT}",
                    "RAFKA_META_QUORUM_VOTERS": voters,
                    "RAFKA_META_QUORUM_LISTENERS": grpc_listeners,
                },
                self.internal_properties | {k: overrides[k] for k in meta_keys},
            )
        meta_servers = ",".join(f"meta-{i}:{META_PORT}" for i in range(1, metas + 1))
        for i in range(1, brokers + 1):
            port = base + i - 1
            self._add(
                f"broker-{i}",
                "broker",
                i,
                f"{subnet}.{20 + i}",
                port,
                {
                    "RAFKA_NODE_ID": str(i),
                    "RAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{KAFKA_PORT}",
                    "RAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
                    "RAFKA_REPLICATION_LISTENER": f"0.0.0.0:{REPLICATION_PORT}",
                    "RAFKA_ADVERTISED_REPLICATION_LISTENER": f"broker-{i}:{REPLICATION_PORT}",
                    "RAFKA_META_BOOTSTRAP_SERVERS": meta_servers,
                },
                {"default.replication.factor": str(min(3, brokers))}
                | self.internal_properties
                | {k: overrides[k] for k in broker_keys},
            )

    # -- set-up --------------------------------------------------------------------------------

    def _labels(self) -> dict[str, str]:
        return {LABEL: "containers", f"{LABEL}.run": self.run_id, f"{LABEL}.pid": str(os.getpid())}

    def _create_networks(self) -> tuple[Network, Network, str]:
        client = Network(
            docker_network_kw={
                "driver": "bridge",
                "options": {"com.docker.network.bridge.enable_icc": "false"},
                "labels": self._labels(),
            }
        ).create()
        # A fixed subnet, so each node keeps its IP across restarts (see README: Raft peers'
        # addresses are cached by pysyncobj). Pick one no other network uses.
        for _ in range(50):
            prefix = f"172.{random.randrange(24, 32)}.{random.randrange(256)}"
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=f"{prefix}.0/24")]
            )
            net = Network(
                docker_network_kw={
                    "driver": "bridge",
                    "internal": True,
                    "ipam": ipam,
                    "labels": self._labels(),
                }
            )
            try:
                return client, net.create(), prefix
            except docker.errors.APIError as e:
                if "overlap" not in str(e).lower():
                    client.remove()
                    raise
        client.remove()
        raise RuntimeError("no free /24 for the cluster network")

    def _add(
        self,
        name: str,
        kind: str,
        node_id: int,
        ip: str,
        host_port: int,
        env: dict[str, str],
        props: dict[str, str],
    ) -> None:
        data = self.data_dir / name
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o777)  # the image runs as uid 10001
        config = self.data_dir / "config" / f"{name}.properties"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        config.chmod(0o644)
        log_file = self.data_dir / "logs" / f"{name}.log"
        self.nodes[name] = ContainerNode(
            name, kind, node_id, ip, host_port, env, data, config, log_file
        )

    def _create(self, node: ContainerNode) -> None:
        """Create the container on the client network, join the cluster network with its fixed
        IP and alias, all before its process starts (so it resolves its peers at once).
        testcontainers' DockerContainer holds the spec and its DockerClient creates the
        container (with testcontainers' labels); its start() is not used, since it would
        start the process before the second network is joined."""
        inner = KAFKA_PORT if node.kind == "broker" else META_PORT
        tc = (
            DockerContainer(self.image)
            .with_command(node.kind)
            .with_envs(**node.env)
            .with_network(self._client_net)
            .with_volume_mapping(str(node.data), "/var/lib/rafka", "rw")
            .with_volume_mapping(str(node.config_file), f"/etc/rafka/{node.kind}.properties", "ro")
        )
        tc.ports[f"{inner}/tcp"] = ("127.0.0.1", node.host_port)  # type: ignore[assignment]
        dc = tc.get_docker_client()
        node.container = dc.create(
            tc.image,
            command=node.kind,
            environment=tc.env,
            ports=tc.ports,
            name=f"rafka-{self.run_id}-{node.name}",
            labels=self._labels(),
            volumes={h: {"bind": m["bind"], "mode": m["mode"]} for h, m in tc.volumes.items()},
            network=self._client_net.name,
            stop_signal="SIGTERM",
        )
        self._docker.networks.get(self._cluster_net.id).connect(
            node.container, ipv4_address=node.ip, aliases=[node.name]
        )

    # -- LocalCluster's interface ---------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(
            f"127.0.0.1:{n.host_port}" for n in self.nodes.values() if n.kind == "broker"
        )

    @property
    def meta_servers(self) -> list[str]:
        return [f"127.0.0.1:{n.host_port}" for n in self.nodes.values() if n.kind == "meta"]

    def start(self, timeout: float = 90.0) -> None:
        for kind in ("meta", "broker"):
            for name, node in self.nodes.items():
                if node.kind == kind:
                    self.start_node(name)
        self.wait_ready(timeout)

    def start_node(self, name: str) -> None:
        node = self.nodes[name]
        if node.container is None:
            self._create(node)
        assert node.container is not None
        node.container.reload()
        if node.container.status == "paused":
            node.container.unpause()
        elif node.container.status != "running":
            node.container.start()

    def kill(self, name: str) -> None:
        """kill -9 (``docker kill``), as a crash would; returns once it has exited."""
        c = self.nodes[name].container
        if c is None:
            return
        with contextlib.suppress(docker.errors.APIError):
            c.kill()
        c.wait(timeout=30)

    def signal_node(self, name: str, sig: int) -> None:
        """SIGSTOP/SIGCONT are ``docker pause``/``unpause``; other signals are sent to PID 1."""
        c = self.nodes[name].container
        if c is None:
            return
        c.reload()
        with contextlib.suppress(docker.errors.APIError):
            if sig == signal.SIGSTOP and c.status == "running":
                c.pause()
            elif sig == signal.SIGCONT:
                if c.status == "paused":
                    c.unpause()
            elif c.status == "running":
                c.kill(signal=signal.Signals(sig).name)

    def stop_node(self, name: str, timeout: float = 30.0) -> None:
        """SIGTERM (the broker's controlled shutdown) and wait; SIGKILL after ``timeout``."""
        c = self.nodes[name].container
        if c is None:
            return
        self.signal_node(name, signal.SIGCONT)
        c.stop(timeout=int(timeout))

    def stop(self) -> None:
        """Brokers first (they hand leadership away), then the meta nodes; as LocalCluster."""
        for kind in ("broker", "meta"):
            names = [n for n, node in self.nodes.items() if node.kind == kind]
            for name in names:
                self.signal_node(name, signal.SIGCONT)
                self.signal_node(name, signal.SIGTERM)
            for name in names:
                c = self.nodes[name].container
                if c is None:
                    continue
                try:
                    c.wait(timeout=30)
                except Exception:
                    log.warning("%s did not stop within 30s; killing it", name)
                    self.kill(name)

    def wait_ready(self, timeout: float = 90.0, names: list[str] | None = None) -> None:
        """Poll until each (named) node answers on its published port: ApiVersions from a
        broker (whose Kafka port opens only after its first metadata snapshot), an HTTP/2
        handshake from a meta node's gRPC server. (A bare TCP connect proves nothing here:
        Docker's proxy accepts connections for a container whose server is not up.)"""
        deadline = time.monotonic() + timeout
        for name in names or list(self.nodes):
            node = self.nodes[name]
            while not self._answers(node):
                proc = node.proc
                code = None if proc is None else proc.poll()
                if code is not None:
                    raise RuntimeError(f"{name} exited with {code}:\n{self.logs(name, 30)}")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{name} not ready after {timeout:.0f}s:\n{self.logs(name, 30)}"
                    )
                time.sleep(0.2)

    def _answers(self, node: ContainerNode) -> bool:
        address = f"127.0.0.1:{node.host_port}"
        if node.kind == "broker":
            try:
                supported_apis(address, timeout=1.0)
            except (OSError, RuntimeError):
                return False
            return True
        channel = grpc.insecure_channel(address)
        try:
            grpc.channel_ready_future(channel).result(timeout=1.0)
            return True
        except grpc.FutureTimeoutError:
            return False
        finally:
            channel.close()

    # -- container-only faults ------------------------------------------------------------------

    def pause(self, name: str) -> None:
        self.signal_node(name, signal.SIGSTOP)

    def unpause(self, name: str) -> None:
        self.signal_node(name, signal.SIGCONT)

    def isolate(self, name: str) -> None:
        """Cut the node off the cluster network (meta service, other brokers); its published
        port, on the client network, stays up."""
        node = self.nodes[name]
        assert node.container is not None
        self._docker.networks.get(self._cluster_net.id).disconnect(node.container)

    def rejoin(self, name: str) -> None:
        node = self.nodes[name]
        assert node.container is not None
        self._docker.networks.get(self._cluster_net.id).connect(
            node.container, ipv4_address=node.ip, aliases=[node.name]
        )

    def readdress(self, name: str, last_octet: int) -> str:
        """Give a (stopped) node a new IP on the cluster network, as a Kubernetes pod gets on
        every restart; its alias stays. Returns the new IP."""
        node = self.nodes[name]
        assert node.container is not None
        node.ip = f"{node.ip.rsplit('.', 1)[0]}.{last_octet}"
        net = self._docker.networks.get(self._cluster_net.id)
        net.disconnect(node.container)
        net.connect(node.container, ipv4_address=node.ip, aliases=[node.name])
        return node.ip

    def recreate(self) -> None:
        """Remove every (stopped) container and create new ones on the same data volumes, as a
        redeployment would; ``start()`` then starts them."""
        for node in self.nodes.values():
            self._remove(node)

    # -- diagnostics and teardown ---------------------------------------------------------------

    def logs(self, name: str, tail: int | None = None) -> str:
        c = self.nodes[name].container
        if c is None:
            return "(no container)"
        try:
            out = c.logs(tail=tail if tail is not None else "all").decode(errors="replace")
        except docker.errors.APIError as e:
            return f"(no logs: {e})"
        return out

    def _remove(self, node: ContainerNode) -> None:
        if node.container is None:
            return
        with node.log_file.open("a") as out:
            out.write(self.logs(node.name))
        with contextlib.suppress(docker.errors.APIError):
            node.container.remove(force=True, v=True)
        node.container = None

    def destroy(self) -> None:
        """Remove the containers (keeping their logs under <data_dir>/logs) and the networks."""
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                self._remove(node)
        for net in (self._cluster_net, self._client_net):
            with contextlib.suppress(Exception):
                net.remove()
        self._docker.close()


def remove_leftovers() -> list[str]:
    """Remove containers and networks of earlier runs whose test process is gone (e.g. killed
    before its teardown: without Ryuk nothing else cleans up). Returns what was removed."""
    client = docker.from_env()
    removed = []
    try:
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}=containers"}):
            if not _pid_alive(c.labels.get(f"{LABEL}.pid", "")):
                c.remove(force=True, v=True)
                removed.append(c.name)
        for n in client.networks.list(filters={"label": f"{LABEL}=containers"}):
            if not _pid_alive(n.attrs.get("Labels", {}).get(f"{LABEL}.pid", "")):
                with contextlib.suppress(docker.errors.APIError):
                    n.remove()
                    removed.append(n.name)
    finally:
        client.close()
    return removed


def _pid_alive(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
