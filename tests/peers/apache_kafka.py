"""Apache Kafka 4.4 in KRaft mode on loopback ports, beside Rafka, as the judge of its answers.

`ApacheKafka(data_dir, brokers=1)` runs one combined node (broker and controller in one JVM);
`brokers=3` runs three brokers and a controller, for what replication changes; `controllers=3`
runs a quorum of three controllers (ids 100, 101, 102) beside the brokers, for what a quorum
does; `heap="1g"` gives every node that heap (benchmarks) instead of a test node's small one.
The jars come from `tests/peers/setup.sh` (Maven Central). Topic defaults follow
`cluster.local.LocalCluster`: `default.replication.factor` and the internal topics' factors are
min(3, brokers), and groups start rebalancing at once (`group.initial.rebalance.delay.ms=0`;
Rafka's default is Kafka's 3000).

Ports: broker i listens on base + i, controller j on base + 100 + j (free_kafka_port finds a
base below Linux's ephemeral range). Each node logs to <data_dir>/logs/<node>.log.

Security, as `cluster.local.LocalCluster` takes it: `protocol` is the brokers' listener (also
its name, so `listener.name.sasl_plaintext.*` settings apply to it, and brokers talk to each
other over it), `extra_listeners` adds listeners of other names on base + 50 + 10 * k + i, and
`client` holds the confluent-kafka settings a client needs on the brokers' listener (its
credentials), with which `wait_ready` asks for Metadata. Security settings of the controller
listener (CONTROLLER) go in `overrides`.
"""

from __future__ import annotations

import base64
import os
import random
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("RAFKA_PEERS_CACHE", REPO / ".cache" / "peers"))
VERSION = "4.4.0"
_LOG4J = Path(__file__).with_name("kafka-log4j2.properties")
# A test node does little: a small heap starts faster and leaves the 2 cores' memory to Rafka.
_JVM = ["-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


def setup(module: str = "kafka") -> Path:
    """The folder of a peers module's jars (Kafka's by default), resolved with Maven first if
    this checkout has none yet."""
    subprocess.run(["bash", str(REPO / "tests" / "peers" / "setup.sh")], check=True)
    return PEERS / module


def free_kafka_port(brokers: int, extra_listeners: int = 0, controllers: int = 1) -> int:
    """A base port whose brokers (base + i), controllers (base + 100 + j) and extra listeners
    (base + 50 + 10 * k + i) are all free now."""
    for _ in range(200):
        base = random.randrange(10000, 32768 - 200, 10)
        extra = [base + 50 + 10 * k + i for k in range(extra_listeners) for i in range(brokers)]
        ports = [*range(base, base + brokers), *range(base + 100, base + 100 + controllers)]
        if all(bindable(p) for p in [*ports, *extra]):
            return base
    raise RuntimeError("no free port range found for Apache Kafka")


@dataclass
class _Node:
    name: str
    config: Path
    log: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)


class ApacheKafka:
    """A KRaft cluster of `brokers` brokers and `controllers` controllers (one of each: one
    combined node), with `overrides` applied to every broker (Kafka's config names and values,
    as strings)."""

    def __init__(
        self,
        data_dir: Path,
        brokers: int = 1,
        overrides: dict[str, str] | None = None,
        base_port: int | None = None,
        protocol: str = "PLAINTEXT",
        extra_listeners: dict[str, str] | None = None,
        client: dict[str, str] | None = None,
        controllers: int = 1,
        heap: str | None = None,
    ) -> None:
        combined = brokers == controllers == 1
        self.data_dir = data_dir.resolve()
        # `heap` (e.g. "1g"): -Xms and -Xmx of every node, as KAFKA_HEAP_OPTS sets them; the
        # default is the small heap of a test node.
        self.jvm = _JVM if heap is None else [f"-Xms{heap}", f"-Xmx{heap}", *_JVM[2:]]
        self.client = client or {}
        self.brokers = brokers
        self.base_port = (
            base_port
            if base_port is not None
            else free_kafka_port(brokers, len(extra_listeners or {}), controllers)
        )
        self.cluster_id = _cluster_id()
        self.broker_ports = [self.base_port + i for i in range(brokers)]
        self.controller_port = self.base_port + 100  # the first controller's
        # node id -> the CONTROLLER port of each controller
        self.controller_ports = {
            (1 if combined else 100 + j): self.controller_port + j for j in range(controllers)
        }
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.broker_ports)
        # name -> the address of each broker (extra listeners beside the brokers' one)
        self.listeners = {protocol: [f"127.0.0.1:{p}" for p in self.broker_ports]} | {
            name: [f"127.0.0.1:{self.base_port + 50 + 10 * k + i}" for i in range(brokers)]
            for k, name in enumerate(extra_listeners or {})
        }
        protocols = {protocol: protocol, **(extra_listeners or {}), "CONTROLLER": "PLAINTEXT"}
        self.jars = PEERS / "kafka"
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.controller_ports.items())
        factor = str(min(3, brokers))
        defaults = {
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in protocols.items()),
            "inter.broker.listener.name": protocol,
            "default.replication.factor": factor,
            "offsets.topic.replication.factor": factor,
            "transaction.state.log.replication.factor": factor,
            "transaction.state.log.min.isr": str(min(2, brokers)),
            "share.coordinator.state.topic.replication.factor": factor,
            "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        self.nodes: list[_Node] = []
        for i in range(brokers):
            listeners = ",".join(f"{n}://{a[i]}" for n, a in self.listeners.items())
            props = defaults | {
                "node.id": str(i + 1),
                "log.dirs": str(self.data_dir / f"broker-{i + 1}"),
                "advertised.listeners": listeners,
            }
            if combined:
                props |= {
                    "process.roles": "broker,controller",
                    "listeners": f"{listeners},CONTROLLER://127.0.0.1:{self.controller_port}",
                }
            else:
                props |= {"process.roles": "broker", "listeners": listeners}
            self.nodes.append(self._write(f"broker-{i + 1}", props | (overrides or {})))
        for j, (node_id, port) in enumerate([] if combined else self.controller_ports.items()):
            name = "controller" if controllers == 1 else f"controller-{node_id}"
            props = defaults | {
                "node.id": str(node_id),
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{port}",
                "log.dirs": str(self.data_dir / name),
            }
            props.pop("advertised.listeners", None)
            props.pop("inter.broker.listener.name")
            self.nodes.insert(j, self._write(name, props))

    def _write(self, name: str, props: dict[str, str]) -> _Node:
        config = self.data_dir / "config" / f"{name}.properties"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
        return _Node(name, config, self.data_dir / "logs" / f"{name}.log")

    def _java(self, main: str, *args: str, node: _Node) -> list[str]:
        return java_command(
            self.jars, main, *args, logs=node.log.parent, node=node.name, jvm=self.jvm
        )

    def start(self, timeout: float = 90, format_storage: bool = True) -> None:
        """Format every node's storage (not on a restart: `format_storage=False`), start the
        JVMs of the nodes not running (after a kill, the killed one), and wait until every
        broker is registered and answers Metadata (stops the cluster if that fails)."""
        if not (self.jars / f"kafka_2.13-{VERSION}.jar").exists():
            setup()
        try:
            for node in self.nodes if format_storage else []:
                subprocess.run(
                    self._java(
                        "kafka.tools.StorageTool",
                        "format",
                        "-t",
                        self.cluster_id,
                        "-c",
                        str(node.config),
                        "--ignore-formatted",
                        node=node,
                    ),
                    check=True,
                    capture_output=True,
                )
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is None:
                    continue  # running: a restart starts only the nodes that are down
                node.log.parent.mkdir(parents=True, exist_ok=True)
                with node.log.open("ab") as out:
                    node.proc = subprocess.Popen(
                        self._java("kafka.Kafka", str(node.config), node=node),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float = 90) -> None:
        """Until every broker answers Metadata listing all brokers (a node that exits fails at
        once, with its log's tail)."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        # Quiet: until the brokers listen, every attempt would log a refused connection.
        conf: dict[str, str | int] = {"bootstrap.servers": self.bootstrap, "log_level": 0}
        admin = AdminClient({**conf, **self.client})
        while True:
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None:
                    raise RuntimeError(
                        f"Apache Kafka {node.name} exited ({node.proc.returncode}):\n"
                        + self.log_tail(node.name)
                    )
            try:
                if len(admin.list_topics(timeout=2).brokers) == self.brokers:
                    return
            except Exception:  # not up yet: KafkaException, or a timeout
                pass
            if time.monotonic() > deadline:
                tails = "\n".join(self.log_tail(n.name) for n in self.nodes)
                raise TimeoutError(f"Apache Kafka not ready after {timeout:g}s:\n{tails}")
            time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 40) -> str:
        node = next(n for n in self.nodes if n.name == name)
        try:
            return "\n".join(node.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return f"({node.log} does not exist)"

    def tool(self, main: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run one of Kafka's command-line tools (a script name or its main class) from the
        jars, as the shell scripts would (`kafka-topics.sh` runs TopicCommand)."""
        from tests.peers.kafka_tools import run_tool  # it imports this module's PEERS

        return run_tool(main, *args, timeout=timeout)

    def kill(self, name: str) -> None:
        """kill -9 of one node."""
        node = next(n for n in self.nodes if n.name == name)
        if node.proc is not None:
            node.proc.kill()
            node.proc.wait()

    def stop(self) -> None:
        """SIGTERM to the brokers (Kafka's controlled shutdown needs the controllers), then to
        the controllers; kill -9 what has not exited after 20 s."""
        controllers = [n for n in self.nodes if n.name.startswith("controller")]
        brokers = [n for n in self.nodes if n not in controllers]
        for group in (brokers, controllers):
            running = [n.proc for n in group if n.proc is not None and n.proc.poll() is None]
            for proc in running:
                os.killpg(proc.pid, signal.SIGTERM)
            for proc in running:
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def java_command(
    jars: Path, main: str, *args: str, logs: Path, node: str, jvm: list[str] = _JVM
) -> list[str]:
    """The command that runs `main` from the jars in `jars`, logging to <logs>/<node>.log
    (kafka-log4j2.properties): Kafka's nodes and tools, Connect workers, MirrorMaker 2."""
    return [
        "java",
        *jvm,
        f"-Dlog4j2.configurationFile={_LOG4J}",
        f"-Dkafka.logs.dir={logs.as_posix()}",
        f"-Drafka.kafka.node={node}",
        "-cp",
        f"{jars}/*",
        main,
        *args,
    ]


def _cluster_id() -> str:
    """A random cluster id in Kafka's form (base64url of 16 bytes, no padding), never starting
    with '-' (the storage tool would read `-t -XYZ...` as an option)."""
    while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))[0] == "-":
        pass
    return cid


def bindable(port: int) -> bool:
    """Whether a loopback port can be bound right now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
