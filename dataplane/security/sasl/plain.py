"""SASL/PLAIN (RFC 4616) against the ``user_<name>="<password>"`` options of the listener's
JAAS configuration, as Kafka's PlainServerCallbackHandler."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from dataplane.security.sasl.mechanism import Identity, SaslFailure

_USER_PREFIX = "user_"
_NOBODY = b"\x00" * 32  # compared against when the user is unknown, so timing tells nothing


def plain_users(options: Mapping[str, str]) -> dict[str, bytes]:
    """user name -> password, from JAAS options."""
    return {
        key[len(_USER_PREFIX) :]: value.encode()
        for key, value in options.items()
        if key.startswith(_USER_PREFIX)
    }


class PlainServer:
    """One PLAIN exchange: a single client message ``[authzid] NUL authcid NUL passwd``."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._users = users
        self.identity: Identity | None = None

    async def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure(
                f"malformed PLAIN message ({len(parts) - 1} NUL separators, expected 2)",
                public=f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}",
            )
        try:
            authzid, username, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("PLAIN message is not UTF-8") from None
        if not username:
            raise SaslFailure(
                "PLAIN without a user name", public="Authentication failed: username not specified"
            )
        if not password:
            raise SaslFailure(
                f"PLAIN without a password for user {username!r}",
                public="Authentication failed: password not specified",
            )
        expected = self._users.get(username)
        matches = hmac.compare_digest(parts[2], _NOBODY if expected is None else expected)
        if expected is None or not matches:
            raise SaslFailure(
                f"PLAIN user {username!r} "
                + (
                    "is not in the listener's sasl.jaas.config"
                    if expected is None
                    else "gave a wrong password"
                ),
                public="Authentication failed: Invalid username or password",
            )
        if authzid and authzid != username:
            raise SaslFailure(
                f"PLAIN user {username!r} asked for authorization id {authzid!r}",
                public="Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        self.identity = Identity(f"User:{username}")
        return b""
