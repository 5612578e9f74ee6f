"""Kafka's listener model: listeners, advertised.listeners, listener.security.protocol.map.

A listener is a name bound to an address and a security protocol (``INTERNAL://:9093`` with
``INTERNAL:SASL_SSL`` in the map). Listener names are case-insensitive and kept upper-case, as
Kafka's ListenerName.normalised does; per-listener settings are ``listener.name.<lower>.*``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
# NAME://host:port, the host possibly empty or a bracketed IPv6 address (Kafka's
# SocketServerConfigs.LISTENER_URI_REGEX)
_LISTENER = re.compile(r"^([A-Za-z0-9_\-.]+)://(\[[0-9a-fA-F:.%\w]*\]|[^:\[\]/]*):(-?\d+)$")
_ANY_HOST = ("", "0.0.0.0", "::")


class ListenerConfigError(ValueError):
    """listeners, advertised.listeners or listener.security.protocol.map is wrong."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper-case
    host: str  # "" binds every interface
    port: int
    security_protocol: str

    @property
    def tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS


def parse_protocol_map(text: str) -> dict[str, str]:
    """``INTERNAL:SASL_SSL,EXTERNAL:SSL`` -> {"INTERNAL": "SASL_SSL", "EXTERNAL": "SSL"}."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ListenerConfigError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL, got {item!r}"
            )
        if protocol not in SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"listener.security.protocol.map: {name} maps to unknown security protocol "
                f"{protocol!r}; use one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in out:
            raise ListenerConfigError(f"listener.security.protocol.map names listener {name} twice")
        out[name] = protocol
    return out


def parse_listeners(text: str, protocols: dict[str, str], setting: str) -> list[Listener]:
    """Parse ``listeners`` or ``advertised.listeners`` (``setting`` names it in errors)."""
    listeners: list[Listener] = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        m = _LISTENER.match(item)
        if m is None:
            raise ListenerConfigError(f"{setting}: {item!r} is not NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ListenerConfigError(f"{setting}: port {port} of {name} is out of range")
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(
                f"{setting}: listener {name} has no security protocol; add {name}:<protocol> "
                "to listener.security.protocol.map"
            )
        if any(other.name == name for other in listeners):
            raise ListenerConfigError(f"{setting}: listener name {name} appears twice")
        listeners.append(Listener(name, host, port, protocol))
    if not listeners:
        raise ListenerConfigError(f"{setting} is empty")
    return listeners


@dataclass(frozen=True, slots=True)
class BrokerListeners:
    """What a broker binds and what it tells clients, one advertised entry per bound listener
    at most (a listener left out of ``advertised.listeners`` is served but not advertised)."""

    bound: list[Listener]
    advertised: list[Listener]


def broker_listeners(config: BrokerConfig) -> BrokerListeners:
    """Kafka's rules: advertised.listeners defaults to listeners; every advertised name must be
    a bound one; the wildcard host advertises 127.0.0.1 (a local default, where Kafka takes the
    canonical host name)."""
    protocols = parse_protocol_map(config.listener_security_protocol_map)
    bound = parse_listeners(config.listeners, protocols, "listeners")
    ports = [listener.port for listener in bound if listener.port]
    if len(set(ports)) != len(ports):
        raise ListenerConfigError(
            f"listeners: each listener needs its own port ({config.listeners})"
        )
    advertised = parse_listeners(
        config.advertised_listeners or config.listeners, protocols, "advertised.listeners"
    )
    names = {listener.name for listener in bound}
    for listener in advertised:
        if listener.name not in names:
            raise ListenerConfigError(
                f"advertised.listeners: {listener.name} is not in listeners ({config.listeners})"
            )
    advertised = [
        Listener(
            a.name, "127.0.0.1" if a.host in _ANY_HOST else a.host, a.port, a.security_protocol
        )
        for a in advertised
    ]
    return BrokerListeners(bound, advertised)
