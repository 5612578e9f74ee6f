"""What every SASL mechanism's server side shares: the exchange it runs and how it fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SaslFailure(Exception):
    """Authentication failed. ``reason`` is for the broker's log only (it may say which user
    does not exist); ``public`` goes to the client (None: Kafka's generic message, which leaks
    nothing). No last server message goes with it (such as SCRAM's ``e=invalid-proof``): Kafka
    sends none, only the error."""

    def __init__(self, reason: str, public: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.public = public


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a completed exchange authenticated."""

    principal: str  # "User:alice"
    credential_expiry_ms: int | None = None  # wall clock ms the token/JWT expires; None: never
    token_authenticated: bool = False  # with a delegation token (SCRAM tokenauth=true)


class MechanismServer(Protocol):
    """The server side of one exchange: ``evaluate`` each client token in turn and send back
    what it returns, until ``identity`` is set (success) or it raises SaslFailure."""

    identity: Identity | None

    async def evaluate(self, token: bytes) -> bytes: ...


class Refused:
    """An exchange that can only fail, with a message the client may see (a re-authentication
    asking for another mechanism than the session's, as Kafka answers it)."""

    identity: Identity | None = None

    def __init__(self, message: str) -> None:
        self._message = message

    async def evaluate(self, token: bytes) -> bytes:
        raise SaslFailure(self._message, public=self._message)
