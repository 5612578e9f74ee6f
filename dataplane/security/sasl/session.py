"""The SASL state of one connection (Kafka's SaslServerAuthenticator states)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dataplane.security.sasl.mechanism import MechanismServer


class SaslState(Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"  # a mechanism chosen: waiting for its tokens
    COMPLETE = "complete"  # authenticated (a new handshake re-authenticates, KIP-368)
    FAILED = "failed"  # refused: the connection closes once the answer is out


@dataclass
class SaslSession:
    listener: str
    authenticated: bool = False
    expires_at_ms: int = 0  # wall-clock ms the session ends (KIP-368); 0: never
    state: SaslState = SaslState.HANDSHAKE
    mechanism: str = ""
    # After a v0 SaslHandshake the client sends bare length-prefixed SASL tokens instead of
    # SaslAuthenticate requests: the server hands such frames to SaslAuthenticator.raw_token.
    raw_tokens: bool = False
    exchange: MechanismServer | None = None
    principal: str = ""  # the authenticated principal; a re-authentication must keep it
    token_authenticated: bool = False  # authenticated with a delegation token
    reauthenticating: bool = False
    supports_reauth: bool = False  # the client used SaslAuthenticate v1+ (KIP-368)

    @property
    def closing(self) -> bool:
        """Authentication failed: the server closes the connection after this answer."""
        return self.state is SaslState.FAILED
