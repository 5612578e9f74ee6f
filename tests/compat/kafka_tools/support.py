"""What the modules of tests/compat/kafka_tools share: running a tool of Kafka's as an operator
types it (`tool`, `ok`, `fails`), reading its output (`rows`, `describe_topic`), and running the
same command on Apache Kafka and Rafka at once and comparing what each prints once ids, ports and
times are masked (`each`, `both`, `both_fail`, `both_configs`: a row of the compat report each).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from tests.compat.pair import record
from tests.peers.kafka_tools import run_tool

T = TypeVar("T")


@dataclass
class Sides:
    """Where the same commands run: Apache Kafka and Rafka."""

    kafka: str
    rafka: str


def tool(
    bootstrap: str, command: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`command` as an operator types it (the script's name, then its options; split as a
    shell does), against `bootstrap`; `args` are further options (file paths)."""
    name, *options = shlex.split(command)
    return run_tool(name, "--bootstrap-server", bootstrap, *options, *args, input=input)


def ok(bootstrap: str, command: str, *args: str, input: str | None = None) -> str:
    """The tool's stdout; it must exit 0."""
    return printed(bootstrap, command, *args, input=input)[0]


def printed(bootstrap: str, command: str, *args: str, input: str | None = None) -> tuple[str, str]:
    """What the tool prints for its user: stdout, and stderr without the clients' log lines
    and stack traces (the messages tools print there themselves); it must exit 0."""
    r = tool(bootstrap, command, *args, input=input)
    assert r.returncode == 0, f"{command} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout, _messages(r.stderr)


def fails(bootstrap: str, command: str, *args: str) -> str:
    """What the tool prints (stdout, then stderr without log lines and stack traces); it must
    exit non-zero."""
    r = tool(bootstrap, command, *args)
    assert r.returncode != 0, f"{command} succeeded:\n{r.stdout}"
    return _messages(r.stdout + r.stderr)


def _messages(text: str) -> str:
    return "\n".join(
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith(("\tat ", "\t...", "[20", " (", "Caused by: "))
    )


def rows(text: str) -> list[list[str]]:
    """The output's non-empty lines as whitespace-separated cells (column widths vary)."""
    return [line.split() for line in text.splitlines() if line.strip()]


_MASKS = [
    (re.compile(r"127\.0\.0\.1:\d+\s*\(\d+\)"), "COORDINATOR"),  # host:port (id)
    (re.compile(r"127\.0\.0\.1:\d+"), "HOST:PORT"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "UUID"),
    (re.compile(r"(?<![\w-])[A-Za-z0-9_-]{22}(?![\w-])"), "UUID"),  # member and topic ids
    (re.compile(r"\b1\d{12}\b"), "TIME"),  # epoch milliseconds
]


def masked(text: str) -> list[list[str]]:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return rows(text)


def each(sides: Sides, do: Callable[[str], T]) -> tuple[T, T]:
    """`do(bootstrap)` for Apache Kafka and for Rafka, at once: (Kafka's, Rafka's)."""
    with ThreadPoolExecutor(1) as pool:
        kafka = pool.submit(do, sides.kafka)
        rafka = do(sides.rafka)
        return kafka.result(), rafka


def both(
    sides: Sides,
    case: str,
    command: str,
    *args: str,
    input: str | None = None,
    rows_of: str | None = None,
) -> str:
    """Run on both: what each prints (stdout, then the tool's messages on stderr) must be the
    same once masked (a row of the compat report). Returns Rafka's stdout. `rows_of`: compare
    only the header and the rows of that name (Kafka is shared with the other compat modules,
    so its listings hold their groups too)."""
    kafka, rafka = each(sides, lambda b: printed(b, command, *args, input=input))
    if rows_of is not None:
        kafka, rafka = _rows_of(rows_of, kafka), _rows_of(rows_of, rafka)
    _compare(case, command, "\n".join(kafka), "\n".join(rafka))
    return rafka[0]


def _rows_of(name: str, printed: tuple[str, str]) -> tuple[str, str]:
    """The header line (if any) and the lines of `name` of a listing (stdout, stderr)."""
    kept = [line for line in printed[0].splitlines() if line.split()[:1] in (["GROUP"], [name])]
    return "\n".join(kept), printed[1]


def both_fail(sides: Sides, case: str, command: str) -> str:
    """Run on both: each must fail, and say the same once masked."""
    kafka, rafka = each(sides, lambda b: fails(b, command))
    _compare(case, command, kafka, rafka)
    return rafka


def _compare(case: str, command: str, kafka: str, rafka: str) -> None:
    same = masked(kafka) == masked(rafka)
    found = [] if same else [f"`{command}`", "Kafka:", kafka, "Rafka:", rafka]
    summary = kafka.strip().splitlines()[0][:60] if kafka.strip() else "(nothing)"
    record(f"tool: {case}", summary, "same" if same else rafka.strip()[:60], found)


def both_configs(sides: Sides, case: str, command: str, names: str | None = None) -> list[str]:
    """kafka-configs --describe on both: the lines of the comma-separated config `names`
    (None: those Rafka lists) must be the same. Returns Rafka's."""
    kafka, rafka = each(sides, lambda b: ok(b, command))
    wanted = (
        set(names.split(","))
        if names
        else {line.split("=")[0].strip() for line in rafka.splitlines()[1:]}
    )

    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.split("=")[0].strip() in wanted]

    _compare(case, command, "\n".join(lines(kafka)), "\n".join(lines(rafka)))
    return lines(rafka)


def produce(bootstrap: str, topic: str, lines: list[str], *reader_properties: str) -> None:
    """kafka-console-producer with `lines` on its stdin."""
    options = "".join(f" --reader-property {p}" for p in reader_properties)
    ok(bootstrap, f"kafka-console-producer --topic {topic}{options}", input="\n".join(lines) + "\n")


def describe_topic(bootstrap: str, topic: str) -> list[list[str]]:
    """kafka-topics --describe: the topic line, then per partition `Topic: t Partition: p
    Leader: l Replicas: r,... Isr: i,... Elr: LastKnownElr:` as cells."""
    return rows(ok(bootstrap, f"kafka-topics --describe --topic {topic}"))
