"""The state of one client connection: who it is and what it has opened.

The server makes one per accepted connection; handlers, the authorizer, SASL, quotas and share
sessions read or update it. It lives below all of them (as Kafka's RequestContext carries the
principal, listener and security protocol of a request's connection), so none of them imports
the handlers to name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataplane.security.sasl.session import SaslSession


@dataclass(slots=True)
class Connection:
    """Per-connection state a handler may read or update."""

    peer: str  # "ip:port", for log lines
    client_software: tuple[str, str] = ("", "")
    attrs: dict[str, Any] = field(default_factory=dict)
    listener: str = "PLAINTEXT"  # name of the listener the client came in through
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    host: str = ""  # the client's IP address, as ACLs name hosts
    principal: str = "User:ANONYMOUS"  # set by TLS client authentication or SASL
    sasl: SaslSession | None = None  # on SASL listeners: the authentication state
    # KIP-219: while throttled for a quota, no request is read before this time.monotonic()
    muted_until: float = 0.0
    # (group id, member id) of the share sessions it opened: they end when it closes
    share_sessions: set[tuple[str, str]] = field(default_factory=set)
