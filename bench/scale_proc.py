"""What a broker process costs, read from /proc: CPU seconds, resident memory, and py-spy
profiles of a measured window (the scale bench's figures are per process, not per machine:
the machine is shared with the clients that drive the load)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from cluster.local import LocalCluster

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # the command may hold spaces; it ends at ')'
    return (int(fields[11]) + int(fields[12])) / _TICKS  # fields 14 and 15 of proc(5)


def rss_kb(pid: int) -> int:
    return _status_kb(pid, "VmRSS")


def peak_rss_kb(pid: int) -> int:
    """The process's peak resident memory since it started (VmHWM)."""
    return _status_kb(pid, "VmHWM")


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for pid {pid}")


def broker_pids(cluster: LocalCluster) -> dict[str, int]:
    """The running brokers' pids by node name."""
    return {
        name: node.proc.pid
        for name, node in cluster.nodes.items()
        if node.kind == "broker" and node.proc is not None and node.proc.poll() is None
    }


class CpuMeter:
    """CPU % (of one core) of each process between `start()` and `stop()`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._cpu: dict[str, float] = {}
        self._t = 0.0
        self.wall = 0.0
        self.percent: dict[str, float] = {}
        self.seconds: dict[str, float] = {}  # CPU seconds spent in the window

    def start(self) -> CpuMeter:
        self._cpu = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._t = time.monotonic()
        return self

    def stop(self) -> CpuMeter:
        self.wall = time.monotonic() - self._t
        for name, pid in self.pids.items():
            self.seconds[name] = cpu_seconds(pid) - self._cpu[name]
            self.percent[name] = 100 * self.seconds[name] / self.wall
        return self


def idle_cpu(
    pids: dict[str, int],
    seconds: float,
    around: contextlib.AbstractContextManager[object] | None = None,
) -> CpuMeter:
    """CPU % of each process over a window of ``seconds`` with no traffic (a measurement
    window, not a wait for a state); ``around``: e.g. a profile of the window."""
    meter = CpuMeter(pids).start()
    with around or contextlib.nullcontext():
        time.sleep(seconds)
    return meter.stop()


class Profiler:
    """py-spy flame graphs of the brokers during the measured windows, into ``out``
    (--profile): where the CPU of a window went, for routing the fixes of a missed bound."""

    def __init__(self, out: Path) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            raise RuntimeError("py-spy is not installed (pip install py-spy)")
        self.exe = exe
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.files: list[Path] = []

    @contextlib.contextmanager
    def window(self, label: str, pids: dict[str, int]) -> Iterator[None]:
        """Record every pid while the block runs; the profile files are listed in `files`."""
        procs = []
        for name, pid in pids.items():
            path = self.out / f"{label}-{name}.txt"
            procs.append(
                subprocess.Popen(
                    [
                        *(self.exe, "record", "--pid", str(pid), "--nonblocking"),
                        *("--format", "raw", "-o", str(path)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            self.files.append(path)
        try:
            yield
        finally:
            for proc in procs:  # SIGINT: py-spy writes what it sampled and exits
                proc.send_signal(2)
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
