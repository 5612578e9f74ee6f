"""The consumer-group workload (``rafka verify --workload group``): the produce workload's
idempotent producer, and a consumer group whose members come and go while it consumes: every
``churn_s`` seconds one member joins, leaves (SIGTERM: it closes, revoking and leaving the group)
or is killed (SIGKILL: the coordinator must notice through the session timeout and hand its
partitions on). ``group_protocol``: ``classic`` or ``consumer`` (KIP-848).

Each member is a process of its own (workload/member.py) writing its history - every record it
is handed, its assignments and revocations, every commit it got an answer for - as JSON lines on
its stdout; a thread per member merges them into the run's `History`. At the end the churn stops
and the members left consume until the group has been handed everything below the final high
watermarks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import IO

from cluster.verify.history import History, MemberEvent
from cluster.verify.workload.produce import Workload

GROUP = "verify-group"
# KIP-848: the session timeout and heartbeat interval are the broker's (group.consumer.*); a
# killed member's partitions wait for the session timeout, so a run shortens it as the classic
# members do theirs (session.timeout.ms=6000).
CONSUMER_PROTOCOL_OVERRIDES = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
}


class Member:
    """One member: its process, and the thread merging its history lines into the run's."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        name: str,
        protocol: str,
        position: dict[int, int],
        log: IO[bytes],
    ) -> None:
        self.history, self.name, self.position = history, name, position
        self.command = [
            sys.executable,
            "-m",
            "cluster.verify.workload.member",
            *("--bootstrap", bootstrap, "--topic", topic, "--group", GROUP),
            *("--protocol", protocol),
        ]
        self._log = log
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader = threading.Thread(target=self._read, name=f"member-{name}", daemon=True)

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self._proc = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=self._log, env=env
        )
        self._reader.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue  # a line cut short by kill -9
            if obj["k"] == "read":
                p, o = obj["p"], obj["o"]
                key, value = obj["key"], obj["value"]
                self.history.read(
                    self.name,
                    p,
                    o,
                    None if key is None else key.encode("latin-1"),
                    None if value is None else value.encode("latin-1"),
                    t=obj["t"],
                )
                self.position[p] = max(self.position.get(p, 0), o + 1)
            else:
                self._event(
                    obj["k"],
                    obj["t"],
                    tuple(obj.get("partitions", ())),
                    tuple(tuple(x) for x in obj.get("offsets", ())),
                    obj.get("detail", ""),
                )

    def _event(
        self,
        kind: str,
        t: float,
        partitions: tuple[int, ...] = (),
        offsets: tuple[tuple[int, int], ...] = (),
        detail: str = "",
    ) -> None:
        self.history.event(MemberEvent(GROUP, self.name, kind, t, partitions, offsets, detail))

    def leave(self, timeout_s: float = 30.0) -> None:
        """SIGTERM: the member stops, closes (revoking, leaving the group) and exits; killed
        if it has not within ``timeout_s``."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._reader.join(5)
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.history.note(f"{self.name} did not leave within {timeout_s}s: killed")
            self.kill()
        self._reader.join(5)

    def kill(self) -> None:
        """kill -9: no close, no LeaveGroup; its ownership ends here (``killed``)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self._event("killed", time.time())
        self._reader.join(5)


class GroupWorkload(Workload):
    """An idempotent producer, a live reader, and the churning consumer group."""

    def setup(self) -> None:
        super().setup()
        self.members: list[Member] = []
        self._gone: list[Member] = []
        self._logs: list[IO[bytes]] = []
        self._rng = random.Random(f"{self.config.seed}-group")
        self._n = 0
        self.position: dict[int, int] = {}  # the next offset the group has not been handed
        self._churn_stop = threading.Event()
        self._churn = threading.Thread(target=self._churn_loop, name="group-churn", daemon=True)

    def _join(self) -> None:
        self._n += 1
        c = self.config
        name = f"member-{self._n}"
        logs = self.cluster.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = (logs / f"{name}.log").open("ab")
        self._logs.append(log)
        member = Member(
            self.history,
            self.cluster.bootstrap,
            c.topic,
            name,
            c.group_protocol,
            self.position,
            log,
        )
        member.start()
        self.members.append(member)

    def start(self) -> None:
        super().start()
        for _ in range(self.config.group_members):
            self._join()
        self._churn.start()

    def _churn_loop(self) -> None:
        while not self._churn_stop.wait(self.config.churn_s):
            action = self._rng.choice(("join", "leave", "kill"))
            if action == "join" or len(self.members) < 2:
                self._join()
                continue
            member = self.members.pop(self._rng.randrange(len(self.members)))
            self._gone.append(member)
            if action == "leave":
                member.leave()
            else:
                member.kill()

    def catch_up(self, high: dict[int, int], timeout_s: float) -> bool:
        """The live reader, and the group (churn stopped first) handed everything below
        ``high``."""
        self._churn_stop.set()
        self._churn.join(60)
        deadline = time.monotonic() + timeout_s
        ok = super().catch_up(high, timeout_s)
        while not all(self.position.get(p, 0) >= h for p, h in high.items()):
            if time.monotonic() > deadline:
                self.history.note(f"group {GROUP}: handed up to {self.position}, not {high}")
                return False
            time.sleep(0.1)
        return ok

    def stop_consumers(self) -> None:
        super().stop_consumers()
        self._churn_stop.set()
        if self._churn.is_alive():
            self._churn.join(60)
        for m in self.members + self._gone:
            m.leave()
        self.members, self._gone = [], []
        for log in self._logs:
            log.close()
        self._logs = []
