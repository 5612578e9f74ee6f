"""Kafka Connect 4.3.1 workers (distributed mode) and MirrorMaker 2 beside Rafka or Kafka.

`ConnectWorker(data_dir, "worker-1", bootstrap)` writes a worker properties file and runs
`ConnectDistributed` on a free loopback REST port; workers made with the same `group_id` form
one Connect cluster. Its REST helpers (`create`, `status`, `pause`, ...) speak the Connect REST
API with urllib. `MirrorMaker(data_dir, clusters, settings)` runs MirrorMaker 2's dedicated
mode (`connect.mirror.MirrorMaker`) from an mm2.properties file.

The jars come from `tests/peers/setup.sh` (module `connect`: Maven Central has connect-file and
connect-mirror 4.4.0 not, so the whole Connect set is 4.3.1). Each JVM logs to
<data_dir>/logs/<name>.log, Kafka's log4j2 layout (tests/peers/kafka-log4j2.properties).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.peers.apache_kafka import PEERS, bindable, java_command, setup

VERSION = "4.3.1"
JARS = PEERS / "connect"
# Small heaps, the serial collector and C1 only: a test worker moves little data, and the
# 2-core machines the tests run on are better spent on the brokers than on JIT and GC threads.
JVM = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
# Plugins found through their jars' ServiceLoader manifests (KIP-898; Kafka's own plugins all
# have them), not by scanning every class on the classpath: seconds less per start.
_PLUGINS = {"plugin.discovery": "service_load"}


def free_port() -> int:
    """A loopback port free right now, below Linux's ephemeral range (32768-60999)."""
    for _ in range(200):
        port = random.randrange(10000, 32768)
        if bindable(port):
            return port
    raise RuntimeError("no free port found")


class JavaProcess:
    """One JVM of the Connect jars: started in its own session, logged to <logs>/<name>.log."""

    def __init__(self, data_dir: Path, name: str, main: str, config: dict[str, str]) -> None:
        self.data_dir = data_dir.resolve()
        self.name = name
        self.main = main
        self.config_file = self.data_dir / "config" / f"{name}.properties"
        self.log = self.data_dir / "logs" / f"{name}.log"
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in sorted(config.items())))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *args: str) -> None:
        if not (JARS / f"connect-runtime-{VERSION}.jar").exists():
            setup()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        config = str(self.config_file)
        cmd = java_command(
            JARS, self.main, config, *args, logs=self.log.parent, node=self.name, jvm=JVM
        )
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def check_alive(self) -> None:
        """Fail with the log's tail if the JVM has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return f"({self.log} does not exist)"

    def signal(self, sig: int) -> None:
        """Send `sig` to the JVM (SIGSTOP freezes it where it is, SIGCONT lets it go on)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9, as a crash would."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (a worker leaves its group and stops its tasks), kill -9 after `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


class ConnectWorker(JavaProcess):
    """A distributed-mode Connect worker with String converters (records are the text the
    FileStream connectors read and write) and storage topics named after `group_id`.
    `settings` adds to or overrides the worker properties (Kafka's names)."""

    def __init__(
        self,
        data_dir: Path,
        name: str,
        bootstrap: str,
        group_id: str = "connect",
        settings: dict[str, str] | None = None,
    ) -> None:
        self.rest_port = free_port()
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.worker_id = f"127.0.0.1:{self.rest_port}"  # what the status API names it by
        config = (
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "config.storage.topic": f"{group_id}-configs",
                "offset.storage.topic": f"{group_id}-offsets",
                "status.storage.topic": f"{group_id}-status",
                "config.storage.replication.factor": "3",
                "offset.storage.replication.factor": "3",
                "status.storage.replication.factor": "3",
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                "listeners": f"http://127.0.0.1:{self.rest_port}",
                "rest.advertised.host.name": "127.0.0.1",
                "rest.advertised.port": str(self.rest_port),
                "offset.flush.interval.ms": "1000",
            }
            | _PLUGINS
            | (settings or {})
        )
        super().__init__(data_dir, name, "org.apache.kafka.connect.cli.ConnectDistributed", config)

    def wait_ready(self, timeout: float = 120) -> None:
        """Until the worker has read its config topic and joined its group: GET /health
        (KIP-1017) answers 200 from then on, 503 (or 404, or a refused connection) before.
        GET /connectors is no sign of it: it answers from whatever the worker has read so
        far, [] at first."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                self.rest("GET", "/health")
                return
            except (OSError, ConnectError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready after {timeout:g}s:\n{self.log_tail()}")
            time.sleep(0.2)

    # -- REST API -------------------------------------------------------------------------------

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        """One REST call: the decoded JSON answer (None for an empty one); an HTTP error is a
        ConnectError with the status and Connect's message."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            raise ConnectError(e.code, e.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def connectors(self) -> list[str]:
        return sorted(self.rest("GET", "/connectors"))

    def create(self, name: str, config: dict[str, str]) -> Any:
        return self.rest("POST", "/connectors", {"name": name, "config": config})

    def status(self, name: str) -> dict[str, Any]:
        return self.rest("GET", f"/connectors/{_quote(name)}/status")

    def pause(self, name: str) -> None:
        self.rest("PUT", f"/connectors/{_quote(name)}/pause")

    def resume(self, name: str) -> None:
        self.rest("PUT", f"/connectors/{_quote(name)}/resume")

    def restart(self, name: str) -> Any:
        """Restart the connector and all its tasks (KIP-745)."""
        return self.rest("POST", f"/connectors/{_quote(name)}/restart?includeTasks=true")

    def delete(self, name: str) -> None:
        self.rest("DELETE", f"/connectors/{_quote(name)}")


class ConnectError(Exception):
    """A Connect REST call answered with an HTTP error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class MirrorMaker(JavaProcess):
    """MirrorMaker 2 in dedicated mode: `clusters` maps each alias to its bootstrap servers;
    `settings` is the rest of mm2.properties (flows such as ``kafka->rafka.enabled``, per-cluster
    ``<alias>.`` overrides, Kafka's names)."""

    def __init__(
        self,
        data_dir: Path,
        clusters: dict[str, str],
        settings: dict[str, str],
        name: str = "mirror-maker",
    ) -> None:
        config = {"clusters": ", ".join(clusters)} | _PLUGINS
        for alias, servers in clusters.items():
            # Each target cluster's herder reads the plugins again, with that cluster's settings.
            config |= {f"{alias}.bootstrap.servers": servers}
            config |= {f"{alias}.{k}": v for k, v in _PLUGINS.items()}
        config |= settings
        super().__init__(data_dir, name, "org.apache.kafka.connect.mirror.MirrorMaker", config)


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")
