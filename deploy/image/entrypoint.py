#!/usr/bin/env python3
"""Entry point of the Rafka container image: ``rafka-entrypoint meta|broker [rafka flags...]``.

It runs ``rafka meta`` or ``rafka broker`` after filling in what a container or a Kubernetes pod
cannot know in advance. Settings keep their usual sources and precedence (``-o`` flags, then
``RAFKA_*`` environment variables, then the properties file, then the defaults; README.md):

1. The properties file: ``$RAFKA_CONFIG`` if set, else ``/etc/rafka/<role>.properties`` if it
   exists (a mounted ConfigMap or file); passed as ``--config``.
2. The node's ordinal: ``$RAFKA_ORDINAL`` if set, else the number that ends the hostname
   (``rafka-broker-2`` -> 2, a StatefulSet pod), else none.
3. ``node.id``, when neither the environment nor the file sets it: ordinal +
   ``$RAFKA_NODE_ID_OFFSET`` (default 1), so pod ``rafka-broker-0`` is broker 1.
4. Placeholders in every ``RAFKA_*`` value: ``{ordinal}``, ``{node_id}``, ``{hostname}``,
   ``{fqdn}``, and ``{ordinal+N}`` / ``{node_id+N}`` (e.g. an external port per broker:
   ``PLAINTEXT://example.com:{ordinal+31090}``). Anything else in braces is left alone.
5. Container defaults for what is unset in both the environment and the file: data under
   ``/var/lib/rafka`` (``log.dirs``, ``meta.data.dir``) and, for a broker, advertised addresses
   that other containers can reach (``advertised.listeners`` = ``<NAME>://<fqdn>:<port>`` for
   each of ``listeners``, ``advertised.replication.listener`` = ``<fqdn>:<port of
   replication.listener>``), instead of the 0.0.0.0-derived 127.0.0.1 a bare process uses.

Any other first argument is run as a command (``docker run rafka:dev rafka --help``, ``bash``).
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

RAFKA = os.environ.get("RAFKA_BIN", "/opt/rafka-app/bin/rafka")
ROLES = ("meta", "broker")
DATA_DIR = "/var/lib/rafka"
_PLACEHOLDER = re.compile(r"\{(ordinal|node_id|hostname|fqdn)(?:\+(\d+))?\}")


def env_name(setting: str) -> str:
    """``advertised.listeners`` -> ``RAFKA_ADVERTISED_LISTENERS`` (common/settings.py)."""
    return "RAFKA_" + setting.replace(".", "_").replace("-", "_").upper()


def parse_properties(text: str) -> dict[str, str]:
    """The same format as common.settings.parse_properties (kept stdlib-only here so the
    entry point runs even if the package is broken; tests check both agree)."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            out[line] = ""
        else:
            out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def ordinal_of(hostname: str, env: Mapping[str, str]) -> int | None:
    """``$RAFKA_ORDINAL``, else the trailing number of a StatefulSet pod's hostname."""
    if env.get("RAFKA_ORDINAL", "").strip():
        return int(env["RAFKA_ORDINAL"])
    m = re.search(r"-(\d+)$", hostname.split(".")[0])
    return int(m.group(1)) if m else None


def expand(value: str, names: Mapping[str, object]) -> str:
    """Replace ``{ordinal}``, ``{node_id+N}``... using ``names``; unknown ones raise."""

    def sub(m: re.Match[str]) -> str:
        name, plus = m.group(1), m.group(2)
        if names.get(name) is None:
            raise ValueError(f"{m.group(0)} used but {name} is unknown (set RAFKA_ORDINAL?)")
        if plus is None:
            return str(names[name])
        if name not in ("ordinal", "node_id"):
            raise ValueError(f"{m.group(0)}: only ordinal and node_id take +N")
        return str(int(names[name]) + int(plus))  # type: ignore[call-overload]

    return _PLACEHOLDER.sub(sub, value)


def _port(address: str) -> str:
    return address.rstrip("/").rpartition(":")[2]


def plan(
    argv: list[str],
    env: Mapping[str, str],
    hostname: str,
    fqdn: str,
    config_dir: Path = Path("/etc/rafka"),
) -> tuple[list[str], dict[str, str]]:
    """The command to exec and its environment, for ``argv`` = [role, flags...]."""
    env = dict(env)
    if not argv:
        argv = ["broker"]
    role, rest = argv[0], argv[1:]
    if role not in ROLES:
        return argv, env

    config = env.get("RAFKA_CONFIG") or str(config_dir / f"{role}.properties")
    props: dict[str, str] = {}
    if Path(config).is_file():
        props = parse_properties(Path(config).read_text())
        rest = ["--config", config, *rest]
    elif env.get("RAFKA_CONFIG"):
        raise SystemExit(f"rafka-entrypoint: RAFKA_CONFIG={config} does not exist")

    def is_set(setting: str) -> bool:
        return bool(env.get(env_name(setting), "").strip()) or setting in props

    ordinal = ordinal_of(hostname, env)
    if not is_set("node.id") and ordinal is not None:
        env[env_name("node.id")] = str(ordinal + int(env.get("RAFKA_NODE_ID_OFFSET") or 1))
    node_id = env.get(env_name("node.id")) or props.get("node.id")
    names = {"ordinal": ordinal, "node_id": node_id, "hostname": hostname, "fqdn": fqdn}
    for key, value in list(env.items()):
        if key.startswith("RAFKA_") and "{" in value:
            env[key] = expand(value, names)

    def setting(name: str, default: str) -> str:
        return env.get(env_name(name)) or props.get(name) or default

    defaults: dict[str, str] = {}
    if role == "meta":
        defaults["meta.data.dir"] = DATA_DIR
    else:
        defaults["log.dirs"] = DATA_DIR
        # Every listener, under its own name, at this pod's stable name.
        listeners = [
            item.strip() for item in setting("listeners", "PLAINTEXT://0.0.0.0:9092").split(",")
        ]
        defaults["advertised.listeners"] = ",".join(
            f"{item.partition('://')[0] or 'PLAINTEXT'}://{fqdn}:{_port(item)}"
            for item in listeners
            if item
        )
        repl = setting("replication.listener", "0.0.0.0:9392")
        defaults["advertised.replication.listener"] = f"{fqdn}:{_port(repl)}"
    for name, value in defaults.items():
        if not is_set(name):
            env[env_name(name)] = value
    return [RAFKA, role, *rest], env


def main() -> None:
    argv, env = plan(sys.argv[1:], os.environ, socket.gethostname(), socket.getfqdn())
    if argv[0] in (RAFKA,):
        shown = {k: v for k, v in sorted(env.items()) if k.startswith("RAFKA_")}
        print(f"rafka-entrypoint: {' '.join(argv)} with {shown}", file=sys.stderr, flush=True)
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        raise SystemExit(f"rafka-entrypoint: {argv[0]}: command not found") from None


if __name__ == "__main__":
    main()
