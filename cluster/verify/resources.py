"""What a verify run creates outside its run directory, and how a later run removes what a crashed
one left behind.

A run creates network namespaces, veth links and a bridge (netns.py) and loop-mounted file
systems (loopfs.py). Every name starts with ``rv<id>`` (``id``: 4 hex digits, unique among the
runs on the machine), and while the run lives ``/run/rafka-verify/<id>.json`` names its process
(pid and start time) and its mounts. `cleanup_leftovers` (called before a run starts) removes
every such resource whose run's process is gone: it kills the processes still inside its
namespaces (the nodes of a harness killed with -9), unmounts its file systems, deletes its
namespaces and links. A run that is alive is never touched.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

log = logging.getLogger("rafka.verify")

STATE_DIR = Path("/run/rafka-verify")
_NAME = re.compile(r"^rv([0-9a-f]{4})")


class VerifyError(Exception):
    """The run cannot start or go on (not root, a tool missing, ...); the text says what to do."""


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise VerifyError(
            f"{what} needs root: it creates network namespaces, veth links, a bridge and nftables "
            "rules, and loop-mounts file systems. Run it as root (e.g. sudo -E rafka verify ...)."
        )


def require_tools(tools: dict[str, str]) -> None:
    """``tools``: command -> the Debian package that has it."""
    missing = {t: pkg for t, pkg in tools.items() if shutil.which(t) is None}
    if missing:
        raise VerifyError(
            f"missing {', '.join(missing)}: install them (Debian/Ubuntu: apt-get install "
            f"{' '.join(sorted(set(missing.values())))})"
        )


def run_cmd(*argv: str, check: bool = True, input: str | None = None) -> str:
    """Run a system command; its stderr in the error when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, input=input, check=False)
    if check and done.returncode != 0:
        raise VerifyError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot): with the pid, names it uniquely."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


class Run:
    """This run's id, name prefix and state file."""

    def __init__(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        taken = {p.stem for p in STATE_DIR.glob("*.json")} | set(_resources())
        while True:
            self.id = secrets.token_hex(2)
            if self.id not in taken:
                break
        self.prefix = f"rv{self.id}"
        self.mounts: list[str] = []
        self.state_file = STATE_DIR / f"{self.id}.json"
        self._save()

    def _save(self) -> None:
        pid = os.getpid()
        state = {"pid": pid, "start": _start_time(pid), "mounts": self.mounts}
        self.state_file.write_text(json.dumps(state))

    def add_mount(self, path: Path) -> None:
        self.mounts.append(str(path))
        self._save()

    def remove_mount(self, path: Path) -> None:
        with contextlib.suppress(ValueError):
            self.mounts.remove(str(path))
        self._save()

    def release(self) -> None:
        """Everything is removed: forget the run."""
        self.state_file.unlink(missing_ok=True)


def _alive(state: dict) -> bool:
    return state.get("start") is not None and _start_time(state["pid"]) == state["start"]


def _resources() -> dict[str, dict[str, list[str]]]:
    """run id -> {"netns": [...], "links": [...]} of every ``rv<id>`` name on the machine."""
    out: dict[str, dict[str, list[str]]] = {}
    for line in run_cmd("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if m := _NAME.match(name):
            out.setdefault(m.group(1), {"netns": [], "links": []})["netns"].append(name)
    for line in run_cmd("ip", "-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        if m := _NAME.match(name):
            out.setdefault(m.group(1), {"netns": [], "links": []})["links"].append(name)
    return out


def cleanup_leftovers() -> list[str]:
    """Remove the resources of every run whose process is gone; what was removed, one line each."""
    removed: list[str] = []
    states: dict[str, dict] = {}
    if STATE_DIR.is_dir():
        for path in STATE_DIR.glob("*.json"):
            try:
                states[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError):
                states[path.stem] = {}
    found = _resources()
    for run_id in sorted(set(states) | set(found)):
        state = states.get(run_id, {})
        if state and _alive(state):
            continue
        res = found.get(run_id, {"netns": [], "links": []})
        removed += remove_resources(res["netns"], res["links"], state.get("mounts", []))
        (STATE_DIR / f"{run_id}.json").unlink(missing_ok=True)
    for line in removed:
        log.warning("removed a leftover of a crashed verify run: %s", line)
    return removed


def remove_resources(netns: list[str], links: list[str], mounts: list[str]) -> list[str]:
    """Kill what runs in the namespaces, unmount, delete namespaces and links; what was done."""
    done: list[str] = []
    for ns in netns:
        pids = run_cmd("ip", "netns", "pids", ns, check=False).split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        if pids:
            done.append(f"killed {len(pids)} processes in network namespace {ns}")
    deadline = time.monotonic() + 10  # SIGKILLed processes take a moment to leave
    while time.monotonic() < deadline and any(
        run_cmd("ip", "netns", "pids", ns, check=False).split() for ns in netns
    ):
        time.sleep(0.05)
    for mount in mounts:
        if os.path.ismount(mount):
            device = run_cmd("findmnt", "-n", "-o", "SOURCE", mount, check=False).strip()
            run_cmd("umount", "-l", mount, check=False)
            if device.startswith("/dev/loop"):  # loopfs.py attaches its own devices
                run_cmd("losetup", "--detach", device, check=False)
            done.append(f"unmounted {mount}")
    for ns in netns:
        run_cmd("ip", "netns", "delete", ns, check=False)
        done.append(f"deleted network namespace {ns}")
    for link in links:  # a veth went with its namespace; the bridge is left
        if Path(f"/sys/class/net/{link}").exists():
            run_cmd("ip", "link", "delete", link, check=False)
            done.append(f"deleted link {link}")
    return done
