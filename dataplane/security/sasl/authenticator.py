"""SASL authentication of Kafka connections, as Kafka's SaslServerAuthenticator: the
mechanisms each listener enables, the handshake/authenticate state machine, session lifetimes
and re-authentication (KIP-368)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from dataplane.protocol.errors import ConnectionClosed, ErrorCode
from dataplane.security.listeners import ListenerConfigError, broker_listeners
from dataplane.security.sasl.jaas import JaasConfigError, parse_jaas_config
from dataplane.security.sasl.mechanism import MechanismServer, Refused, SaslFailure
from dataplane.security.sasl.oauthbearer import (
    JwksValidator,
    OAuthBearerServer,
    UnsecuredValidator,
    Validate,
)
from dataplane.security.sasl.plain import PlainServer, plain_users
from dataplane.security.sasl.scram import (
    SCRAM_MECHANISMS,
    ScramMechanism,
    ScramServer,
    token_credential,
)
from dataplane.security.sasl.session import SaslSession, SaslState
from meta.model import DelegationToken, ScramCredential

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.connection import Connection
    from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.sasl")

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")


class SaslConfigError(ValueError):
    """A SASL setting the broker cannot start with."""


@dataclass(frozen=True, slots=True)
class AuthResult:
    """What SaslAuthenticate answers."""

    error: ErrorCode
    message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


@dataclass(frozen=True, slots=True)
class _ListenerSasl:
    mechanisms: tuple[str, ...]  # sasl.enabled.mechanisms of the listener
    plain_users: dict[str, bytes]
    oauth: Validate | None
    reauth_ms: dict[str, int]  # connections.max.reauth.ms by mechanism; 0: sessions never end


def _ms() -> int:
    return int(time.time() * 1000)


class SaslAuthenticator:
    """One per broker: the settings of every SASL listener, and the steps of each
    connection's SaslSession."""

    def __init__(self, config: BrokerConfig, cache: MetadataCache) -> None:
        self._config = config
        self._cache = cache
        self._listeners: dict[str, _ListenerSasl] = {}
        # Credentials derived from delegation tokens (a PBKDF2 each), by (id, mechanism, HMAC).
        self._token_credentials: dict[tuple[str, str, bytes], ScramCredential] = {}
        try:
            listeners = broker_listeners(config).bound
        except ListenerConfigError:
            listeners = []  # the server reports it
        for listener in listeners:
            if listener.sasl:  # settings errors and warnings show at start, not at first login
                self._settings(listener.name)

    def new_session(self, listener: str) -> SaslSession:
        self._settings(listener)
        return SaslSession(listener)

    # -- the exchange -----------------------------------------------------------------------

    def handshake(
        self, conn: Connection, mechanism: str, version: int
    ) -> tuple[ErrorCode, tuple[str, ...]]:
        """SaslHandshake: (error, the listener's enabled mechanisms)."""
        session = conn.sasl
        if session is None:
            log.info(
                "SaslHandshake from %s on listener %s, which is %s and has no SASL; the "
                "client's security.protocol should match the listener",
                conn.peer,
                conn.listener,
                conn.security_protocol,
            )
            return ErrorCode.illegal_sasl_state, ()
        enabled = self._settings(session.listener).mechanisms
        if session.state is SaslState.FAILED:
            raise ConnectionClosed("SaslHandshake after a failed authentication")
        if session.state is SaslState.COMPLETE:
            if version < 1 or not session.supports_reauth:
                log.info(
                    "SaslHandshake v%d from %s after it authenticated; re-authentication "
                    "needs SaslHandshake v1 and SaslAuthenticate v1+",
                    version,
                    conn.peer,
                )
                return ErrorCode.illegal_sasl_state, enabled
            session.reauthenticating = True
        elif session.state is not SaslState.HANDSHAKE:
            self._fail(session)
            log.info("%s sent a second SaslHandshake during authentication; closing", conn.peer)
            return ErrorCode.illegal_sasl_state, enabled
        if mechanism not in enabled:
            self._fail(session)
            log.info(
                "%s asked for SASL mechanism %r, which listener %s does not enable "
                "(sasl.enabled.mechanisms: %s); closing",
                conn.peer,
                mechanism,
                session.listener,
                ",".join(enabled),
            )
            return ErrorCode.unsupported_sasl_mechanism, enabled
        if session.reauthenticating and mechanism != session.mechanism:
            exchange: MechanismServer = Refused(
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{session.mechanism}'"
            )
        else:
            exchange = self._exchange(session.listener, mechanism)
        session.mechanism, session.exchange = mechanism, exchange
        session.raw_tokens = version == 0
        session.state = SaslState.AUTHENTICATE
        return ErrorCode.none, enabled

    async def authenticate(self, conn: Connection, token: bytes, version: int) -> AuthResult:
        """One SaslAuthenticate request."""
        session = conn.sasl
        if session is None:
            return AuthResult(
                ErrorCode.illegal_sasl_state,
                f"SaslAuthenticate on listener {conn.listener}, which has no SASL",
                b"",
            )
        if session.state is SaslState.FAILED:
            raise ConnectionClosed("SaslAuthenticate after a failed authentication")
        if session.state is SaslState.COMPLETE and not session.reauthenticating:
            return AuthResult(
                ErrorCode.illegal_sasl_state,
                "SaslAuthenticate request received after successful authentication",
                b"",
            )
        if session.state is SaslState.HANDSHAKE:
            self._fail(session)
            log.info("%s sent SaslAuthenticate before SaslHandshake; closing", conn.peer)
            return AuthResult(
                ErrorCode.illegal_sasl_state,
                "Unexpected SaslAuthenticate before SaslHandshake: send SaslHandshake first",
                b"",
            )
        if version > 0:
            session.supports_reauth = True
        try:
            challenge, lifetime_ms = await self._step(conn, session, token)
        except SaslFailure as f:
            self._log_failure(conn, session, f)
            return AuthResult(
                ErrorCode.sasl_authentication_failed,
                f.public or self._generic_failure(session),
                b"",
            )
        return AuthResult(ErrorCode.none, None, challenge, lifetime_ms)

    async def raw_token(self, conn: Connection, token: bytes) -> bytes:
        """A bare SASL token after a v0 SaslHandshake: the bare token to answer with. A failure
        raises ConnectionClosed, as Kafka closes the connection (there is no error field)."""
        session = conn.sasl
        if session is None or not session.raw_tokens or session.state is not SaslState.AUTHENTICATE:
            raise ConnectionClosed("unexpected bare SASL token")
        try:
            challenge, _lifetime_ms = await self._step(conn, session, token)
        except SaslFailure as f:
            raise ConnectionClosed(
                f"SASL/{session.mechanism} authentication on listener {session.listener} "
                f"failed: {f.reason}"
            ) from None
        if session.state is SaslState.COMPLETE:
            session.raw_tokens = False  # Kafka requests follow
        return challenge

    async def _step(
        self, conn: Connection, session: SaslSession, token: bytes
    ) -> tuple[bytes, int]:
        """Feed one client token to the exchange: (answer, session lifetime ms once complete)."""
        exchange = session.exchange
        assert exchange is not None
        try:
            limit = self._config.sasl_server_max_receive_size
            if len(token) > limit:
                raise SaslFailure(
                    f"SASL token of {len(token)} bytes exceeds "
                    f"sasl.server.max.receive.size={limit}",
                    public=f"SASL token of {len(token)} bytes is larger than the broker accepts",
                )
            challenge = await exchange.evaluate(token)
            identity = exchange.identity
            if identity is None:
                return challenge, 0
            if session.reauthenticating and identity.principal != session.principal:
                before, after = (
                    p.replace(":", ".", 1) for p in (session.principal, identity.principal)
                )
                raise SaslFailure(
                    f"re-authentication as {identity.principal} on a connection of "
                    f"{session.principal}",
                    public="Cannot change principals during re-authentication from "
                    f"{before}: {after}",
                )
        except SaslFailure:
            self._fail(session)
            raise
        now = _ms()
        lifetime = self._session_lifetime_ms(session, identity.credential_expiry_ms, now)
        session.state, session.exchange = SaslState.COMPLETE, None
        session.authenticated, session.reauthenticating = True, False
        session.expires_at_ms = now + lifetime if lifetime else 0
        session.principal, session.token_authenticated = (
            identity.principal,
            identity.token_authenticated,
        )
        conn.principal = identity.principal
        log.debug(
            "%s authenticated as %s with %s on listener %s (session %s)",
            conn.peer,
            identity.principal,
            session.mechanism,
            session.listener,
            f"{lifetime} ms" if lifetime else "without expiry",
        )
        return challenge, lifetime

    def _session_lifetime_ms(self, session: SaslSession, expiry_ms: int | None, now: int) -> int:
        """min(connections.max.reauth.ms, time left on the token); 0: the session never ends."""
        reauth_ms = self._settings(session.listener).reauth_ms[session.mechanism]
        if expiry_ms is None:
            return reauth_ms
        left = max(expiry_ms - now, 1)  # 1, never 0: 0 would mean forever
        return min(left, reauth_ms) if reauth_ms else left

    @staticmethod
    def _fail(session: SaslSession) -> None:
        session.state, session.exchange = SaslState.FAILED, None
        session.authenticated = False

    @staticmethod
    def _generic_failure(session: SaslSession) -> str:
        """Kafka's answer when the reason could tell an attacker which users exist."""
        what = "re-authentication" if session.principal else "authentication"
        return (
            f"Authentication failed during {what} due to invalid credentials with SASL "
            f"mechanism {session.mechanism}"
        )

    @staticmethod
    def _log_failure(conn: Connection, session: SaslSession, f: SaslFailure) -> None:
        log.info(
            "failed SASL/%s %s of %s on listener %s: %s",
            session.mechanism,
            "re-authentication" if session.principal else "authentication",
            conn.peer,
            session.listener,
            f.reason,
        )

    # -- mechanisms ---------------------------------------------------------------------------

    def _exchange(self, listener: str, mechanism: str) -> MechanismServer:
        settings = self._settings(listener)
        if mechanism == "PLAIN":
            return PlainServer(settings.plain_users)
        if mechanism == "OAUTHBEARER":
            assert settings.oauth is not None
            return OAuthBearerServer(settings.oauth)
        scram = SCRAM_MECHANISMS[mechanism]
        credentials = self._cache.scram_credentials
        return ScramServer(
            scram, lambda user: credentials.get((user, scram.name)), partial(self._token, scram)
        )

    def _token(
        self, mechanism: ScramMechanism, token_id: str
    ) -> tuple[ScramCredential, DelegationToken] | None:
        """A current delegation token and the SCRAM credential its HMAC stands for."""
        tokens = self._cache.delegation_tokens
        token = tokens.get(token_id)
        now = _ms()
        if (
            not self._config.delegation_token_secret_key
            or token is None
            or min(token.expiry_ms, token.max_ms) < now
        ):
            return None
        key = (token_id, mechanism.name, token.hmac)
        credential = self._token_credentials.get(key)
        if credential is None:
            if len(self._token_credentials) > 2 * len(tokens) + 64:  # forget removed tokens
                self._token_credentials = {
                    k: v for k, v in self._token_credentials.items() if k[0] in tokens
                }
            credential = self._token_credentials[key] = token_credential(mechanism, token)
        return credential, token

    # -- per-listener settings ----------------------------------------------------------------

    def _settings(self, listener: str) -> _ListenerSasl:
        settings = self._listeners.get(listener)
        if settings is None:
            settings = self._listeners[listener] = self._load(listener)
        return settings

    def _load(self, listener: str) -> _ListenerSasl:
        value = self._config.listener_value(listener, "sasl.enabled.mechanisms")
        mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in value.split(",") if m.strip()))
        if unknown := [m for m in mechanisms if m not in MECHANISMS]:
            raise SaslConfigError(
                f"listener {listener}: sasl.enabled.mechanisms names {', '.join(unknown)}, "
                f"which Rafka does not implement; use some of {', '.join(MECHANISMS)}"
            )
        if not mechanisms:
            raise SaslConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
        users: dict[str, bytes] = {}
        if "PLAIN" in mechanisms:
            users = plain_users(self._jaas_options(listener, "PLAIN"))
            if not users:
                log.warning(
                    "listener %s enables PLAIN but its JAAS configuration names no user, so "
                    "every PLAIN login fails; set listener.name.%s.plain.sasl.jaas.config="
                    "'org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'user_<name>="<password>";\'',
                    listener,
                    listener.lower(),
                )
        oauth = self._oauth_validator(listener) if "OAUTHBEARER" in mechanisms else None
        reauth_ms = {}
        for mechanism in mechanisms:
            value = self._config.listener_value(listener, "connections.max.reauth.ms", mechanism)
            try:
                reauth_ms[mechanism] = max(int(value or 0), 0)
            except ValueError:
                raise SaslConfigError(
                    f"listener {listener}: connections.max.reauth.ms of {mechanism} is not a "
                    f"number of milliseconds: {value!r}"
                ) from None
        return _ListenerSasl(mechanisms, users, oauth, reauth_ms)

    def _oauth_validator(self, listener: str) -> Validate:
        def setting(name: str) -> str:
            return self._config.listener_value(listener, f"sasl.oauthbearer.{name}", "OAUTHBEARER")

        url = setting("jwks.endpoint.url").strip()
        if not url:
            log.warning(
                "listener %s: OAUTHBEARER uses Kafka's unsecured validator, which accepts "
                "unsigned tokens (alg none) from anyone: for development only; set "
                "sasl.oauthbearer.jwks.endpoint.url to validate signed tokens",
                listener,
            )
            try:
                return UnsecuredValidator(self._jaas_options(listener, "OAUTHBEARER"))
            except ValueError as e:
                raise SaslConfigError(
                    f"listener {listener}: OAUTHBEARER sasl.jaas.config: {e}"
                ) from e
        if not url.startswith(("https://", "file:")):
            raise SaslConfigError(
                f"listener {listener}: sasl.oauthbearer.jwks.endpoint.url must be an https:// "
                f"or file: URL, not {url!r}"
            )
        try:
            refresh_ms = int(setting("jwks.endpoint.refresh.ms"))
            skew_s = int(setting("clock.skew.seconds"))
        except ValueError as e:
            raise SaslConfigError(f"listener {listener}: OAUTHBEARER setting: {e}") from e
        log.info(
            "listener %s: OAUTHBEARER tokens are validated against the JWKS at %s", listener, url
        )
        return JwksValidator(
            url,
            refresh_ms,
            [a.strip() for a in setting("expected.audience").split(",") if a.strip()],
            setting("expected.issuer").strip(),
            setting("sub.claim.name").strip() or "sub",
            skew_s,
        )

    def _jaas_options(self, listener: str, mechanism: str) -> dict[str, str]:
        text = self._config.listener_value(listener, "sasl.jaas.config", mechanism)
        try:
            modules = parse_jaas_config(text)
        except JaasConfigError as e:
            raise SaslConfigError(
                f"listener {listener}: the sasl.jaas.config of {mechanism} does not parse: {e}"
            ) from e
        return {k: v for module in modules for k, v in module.options.items()}
