"""Answers made comparable: a kio response as plain data, what must differ masked, differences
listed by path. Pure functions (no I/O), so tests/unit can check them."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

Plain = Any
"""None, bool, int, float, str, list or dict of those."""

MASKED = "<masked>"

# Fields that differ between any two clusters by nature, masked wherever they appear.
ALWAYS_MASKED = frozenset(
    {
        "throttle_time",  # a quota's throttle, or 0: timing, not behaviour
        "cluster_id",
        "port",
        "host",
        "topic_id",  # random per cluster; zero vs non-zero is kept (mask_uuid)
        "session_lifetime",
    }
)


def plain(value: Any) -> Plain:
    """A kio entity (or any part of one) as nested dicts and lists of simple values: enums by
    name, durations in ms, datetimes in epoch ms, UUIDs and bytes as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, tuple | list | frozenset | set):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    raise TypeError(f"no plain form for {type(value).__name__}")


_ZERO_UUID = str(uuid.UUID(int=0))


def mask(tree: Plain, paths: Iterable[str] = (), keys: Iterable[str] = ALWAYS_MASKED) -> Plain:
    """`tree` with every field named in `keys` masked (a UUID keeps whether it is zero), and
    every value at one of `paths` masked. A path is dotted field names, `*` for any list item
    or field: `topics.*.partitions.*.leader_epoch`."""
    keys = frozenset(keys)
    patterns = [p.split(".") for p in paths]

    def walk(node: Plain, where: list[str]) -> Plain:
        if any(_matches(p, where) for p in patterns):
            return MASKED
        if isinstance(node, dict):
            return {
                k: (_mask_value(v) if k in keys else walk(v, [*where, k])) for k, v in node.items()
            }
        if isinstance(node, list):
            return [walk(v, [*where, "*"]) for v in node]
        return node

    return walk(tree, [])


def _mask_value(value: Plain) -> Plain:
    if value == _ZERO_UUID or value is None:
        return value
    return MASKED


def _matches(pattern: list[str], where: list[str]) -> bool:
    return len(pattern) == len(where) and all(
        p in ("*", w) for p, w in zip(pattern, where, strict=True)
    )


def sort_lists(tree: Plain, paths: Iterable[str], key: Callable[[Plain], Any] = repr) -> Plain:
    """`tree` with the lists at `paths` sorted (Kafka's order of some collections, such as a
    map's entries, is not part of the protocol)."""
    patterns = [p.split(".") for p in paths]

    def walk(node: Plain, where: list[str]) -> Plain:
        if isinstance(node, dict):
            node = {k: walk(v, [*where, k]) for k, v in node.items()}
        elif isinstance(node, list):
            node = [walk(v, [*where, "*"]) for v in node]
            if any(_matches(p, where) for p in patterns):
                node = sorted(node, key=key)
        return node

    return walk(tree, [])


def differences(kafka: Plain, rafka: Plain, where: str = "") -> list[str]:
    """Every place the two trees differ, as `path: kafka=… rafka=…` lines. One rule: where
    Kafka leaves an `error_message` null, Rafka may say why (clients print the message after
    the error's name; none acts on it)."""
    if isinstance(kafka, dict) and isinstance(rafka, dict):
        out = []
        for k in sorted(set(kafka) | set(rafka)):
            if k not in rafka or k not in kafka:
                out.append(
                    f"{where}{k}: kafka={kafka.get(k, '<absent>')!r} "
                    f"rafka={rafka.get(k, '<absent>')!r}"
                )
            else:
                out.extend(differences(kafka[k], rafka[k], f"{where}{k}."))
        return out
    if isinstance(kafka, list) and isinstance(rafka, list):
        if len(kafka) != len(rafka):
            return [
                f"{where.rstrip('.')}: kafka has {len(kafka)} items, rafka {len(rafka)}: "
                f"kafka={_short(kafka)} rafka={_short(rafka)}"
            ]
        out = []
        for i, (k, r) in enumerate(zip(kafka, rafka, strict=True)):
            out.extend(differences(k, r, f"{where}{i}."))
        return out
    if kafka != rafka and not (where.endswith("error_message.") and kafka is None):
        return [f"{where.rstrip('.')}: kafka={kafka!r} rafka={rafka!r}"]
    return []


def _short(value: Plain, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary(tree: Plain, limit: int = 120) -> str:
    """A one-line digest of an answer for the report table: its error codes and messages
    where it has any, else its shape; an answer that is a string ("<connection closed>") as
    it is."""
    if isinstance(tree, str):
        return tree
    found: list[str] = []

    def walk(node: Plain) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if (k == "error_code" and v != "none") or (k == "error_message" and v):
                    found.append(str(v))
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tree)
    text = ", ".join(dict.fromkeys(found)) or "ok"
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
