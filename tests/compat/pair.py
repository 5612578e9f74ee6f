"""One request to Apache Kafka and to Rafka, and the two answers compared (tests/compat).

`Pair.call(case, api_key, version, **fields)` sends the same kio request to both brokers (a
connection each, kept per pair), turns both answers into plain data, masks what must differ
(diff.ALWAYS_MASKED plus the case's own `masked` paths), records a row for the report and fails
the test if they differ, unless the case is in allowlist.ALLOWED (then the row says why).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cluster.client_security import ClientSecurity
from cluster.kafka_client import PLAINTEXT, KafkaConnection
from tests.compat import diff
from tests.compat.allowlist import ALLOWED


@dataclass
class Row:
    case: str
    kafka: str
    rafka: str
    verdict: str  # "same", "allowlisted: <reason>" or "DIFFERENT"
    details: list[str] = field(default_factory=list)


REPORT: list[Row] = []
"""Every compared case of the session, printed by conftest's terminal summary."""


def record(case: str, kafka: str, rafka: str, found: list[str], fail: bool = True) -> bool:
    """Record a compared case (`found`: its differences, none when the same); fail the test if
    they differ and the case is not allowlisted (with `fail=False`, return whether it passed)."""
    if not found:
        verdict = "same"
    elif case in ALLOWED:
        verdict = f"allowlisted: {ALLOWED[case]}"
    else:
        verdict = "DIFFERENT"
    REPORT.append(Row(case, kafka, rafka, verdict, found))
    message = f"{case}: Rafka's answer differs from Kafka's:\n" + "\n".join(found)
    assert not fail or verdict != "DIFFERENT", message
    return verdict != "DIFFERENT"


class CompatClient(KafkaConnection):
    client_id = b"compat"


@dataclass
class Side:
    name: str
    bootstrap: str
    security: ClientSecurity = PLAINTEXT  # how its connections authenticate
    _conn: KafkaConnection | None = None

    def conn(self) -> KafkaConnection:
        if self._conn is None:
            self._conn = self.fresh()
        return self._conn

    def fresh(self) -> KafkaConnection:
        """A new connection (for cases that need one of their own, or that close it)."""
        return CompatClient.to_any(self.bootstrap, security=self.security)

    def reset(self) -> None:
        if self._conn is not None:
            self._conn.sock.close()
            self._conn = None


class Pair:
    """Apache Kafka (`kafka`) and Rafka (`rafka`), with the same topics and settings."""

    def __init__(
        self, kafka_bootstrap: str, rafka_bootstrap: str, security: ClientSecurity = PLAINTEXT
    ) -> None:
        self.kafka = Side("kafka", kafka_bootstrap, security)
        self.rafka = Side("rafka", rafka_bootstrap, security)

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.kafka, self.rafka

    def both(self, fn: Callable[[Side], Any]) -> tuple[Any, Any]:
        """`fn` run against each broker: (Kafka's result, Rafka's result)."""
        return fn(self.kafka), fn(self.rafka)

    def send(self, api_key: int, version: int, **fields: Any) -> tuple[Any, Any]:
        """The request on each side's connection; the two kio answers. A broker that closes
        the connection instead of answering gives the string "<connection closed>"."""

        def one(side: Side) -> Any:
            try:
                return side.conn().call(api_key, version, **fields)
            except (ConnectionError, OSError):
                side.reset()
                return "<connection closed>"

        return self.both(one)

    def call(
        self,
        case: str,
        api_key: int,
        version: int,
        masked: Iterable[str] = (),
        sort: Iterable[str] = (),
        **fields: Any,
    ) -> tuple[diff.Plain, diff.Plain]:
        """Send, compare and record (module docstring); the two masked answers."""
        kafka, rafka = self.send(api_key, version, **fields)
        return self.compare(case, kafka, rafka, masked, sort)

    def compare(
        self,
        case: str,
        kafka: Any,
        rafka: Any,
        masked: Iterable[str] = (),
        sort: Iterable[str] = (),
    ) -> tuple[diff.Plain, diff.Plain]:
        """Compare two answers (kio entities or plain data), record the row, and fail unless
        they are the same or the case is allowlisted."""
        masked, sort = list(masked), list(sort)
        k = diff.sort_lists(diff.mask(diff.plain(kafka), masked), sort)
        r = diff.sort_lists(diff.mask(diff.plain(rafka), masked), sort)
        record(case, diff.summary(k), diff.summary(r), diff.differences(k, r))
        return k, r

    def close(self) -> None:
        for side in self.sides:
            side.reset()


@contextlib.contextmanager
def fresh_connections(pair: Pair) -> Iterator[tuple[KafkaConnection, KafkaConnection]]:
    """A new connection to each broker, closed at the end (cases that break one)."""
    k, r = pair.kafka.fresh(), pair.rafka.fresh()
    try:
        yield k, r
    finally:
        k.sock.close()
        r.sock.close()
