"""Kafka's connection limits (SocketServer's ConnectionQuotas and the Selector's idle expiry):
max.connections, max.connections.per.ip (with max.connections.per.ip.overrides) and
connections.max.idle.ms.

As in Kafka: at max.connections the listeners accept nothing until a connection closes (new
clients wait in the kernel's backlog); a connection from an IP address that already has its
max.connections.per.ip is closed right after the accept; a connection that has sent and received
nothing for connections.max.idle.ms is closed; lowering max.connections dynamically closes the
least recently used connections above it. The three limits are dynamic broker configs, applied
without a restart (`configure`). Rafka has no inter-broker Kafka listener (replication is gRPC),
so Kafka's protected inter-broker listener has no counterpart.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

import anyio

from dataplane.config import BrokerConfig

log = logging.getLogger("rafka.server")

_SWEEP_MAX_S = 10.0  # the idle sweep runs at least this often (and twice per idle timeout)


class Live:
    """One accepted connection: when it last sent or received, and how to close it."""

    __slots__ = ("close", "drained", "host", "last_active", "queued")

    def __init__(self, host: str, close: Callable[[], None]) -> None:
        self.host = host
        self.close = close
        self.last_active = time.monotonic()
        self.queued = 0  # bytes of answers ready and not yet taken by the writer
        self.drained = anyio.Event()  # set when `queued` falls below the writer's bound


def parse_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides (``host:count,...``) by IP address; a host name counts
    for every address it resolves to (Kafka's InetAddress.getByName). Raises ValueError."""
    limits: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not host:count")
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host.strip("[]"), None)}
        except OSError as e:
            raise ValueError(f"cannot resolve {host!r}: {e}") from e
        for address in addresses:
            limits[str(address)] = int(count)
    return limits


class ConnectionQuotas:
    """Connection counts of a broker's listeners against Kafka's limits."""

    def __init__(self, config: BrokerConfig) -> None:
        self.total = 0
        self.by_host: dict[str, int] = {}
        self.live: set[Live] = set()
        self._slot_freed = anyio.Event()
        self._swept = anyio.Event()
        self.configure(config)

    def configure(self, config: BrokerConfig) -> None:
        """Apply the settings in force (at start, and on a dynamic config change)."""
        try:
            overrides = parse_overrides(config.max_connections_per_ip_overrides)
        except ValueError as e:
            log.error(
                "ignoring max.connections.per.ip.overrides=%r: %s (expected host:count,...)",
                config.max_connections_per_ip_overrides,
                e,
            )
            overrides = {}
        self.max_connections = config.max_connections
        self.max_per_ip = config.max_connections_per_ip
        self.per_ip_overrides = overrides
        self.idle_s = config.connections_max_idle_ms / 1000
        self._slot_freed.set()  # a raised limit lets a waiting acceptor through
        self._swept.set()  # the sweep re-reads its period, and closes any excess now

    async def wait_for_slot(self) -> None:
        """Kafka's waitForConnectionSlot: return once the broker is under max.connections."""
        if self.total < self.max_connections:
            return
        log.warning(
            "max.connections=%d reached: new connections wait until one closes (raise it with "
            "rafka configs if the broker should serve more clients)",
            self.max_connections,
        )
        while self.total >= self.max_connections:
            self._slot_freed = anyio.Event()
            await self._slot_freed.wait()

    def admit(self, live: Live) -> bool:
        """Count a newly accepted connection; False (and nothing counted) when its IP address
        is at its max.connections.per.ip: the caller closes it."""
        count = self.by_host.get(live.host, 0)
        limit = self.per_ip_overrides.get(live.host, self.max_per_ip)
        if count >= limit:
            log.info(
                "Rejected connection from %s, address already has the configured maximum of %d "
                "connections (max.connections.per.ip%s)",
                live.host,
                limit,
                ".overrides" if live.host in self.per_ip_overrides else "",
            )
            return False
        self.by_host[live.host] = count + 1
        self.total += 1
        self.live.add(live)
        return True

    def release(self, live: Live) -> None:
        """A counted connection closed."""
        if live not in self.live:
            return
        self.live.discard(live)
        self.total -= 1
        count = self.by_host.pop(live.host, 1) - 1
        if count:
            self.by_host[live.host] = count
        self._slot_freed.set()

    async def sweep(self) -> None:
        """Close idle connections (connections.max.idle.ms) and, when max.connections was
        lowered below the count, the least recently used ones above it."""
        while True:
            with anyio.move_on_after(min(self.idle_s / 2, _SWEEP_MAX_S)):
                await self._swept.wait()
            self._swept = anyio.Event()
            now = time.monotonic()
            for live in [c for c in self.live if now - c.last_active > self.idle_s]:
                log.info(
                    "closing the connection from %s: idle for over connections.max.idle.ms=%d",
                    live.host,
                    int(self.idle_s * 1000),
                )
                self._close(live)
            excess = self.total - self.max_connections
            if excess > 0:
                log.warning(
                    "%d connection(s) over max.connections=%d: closing the least recently used",
                    excess,
                    self.max_connections,
                )
                for live in sorted(self.live, key=lambda c: c.last_active)[:excess]:
                    self._close(live)

    def _close(self, live: Live) -> None:
        self.release(live)
        live.close()
