"""SASL/OAUTHBEARER (RFC 7628): a JWT in the client's first message, validated either against
a JWKS (``sasl.oauthbearer.jwks.endpoint.url``, https or file, reloaded periodically) or, for
development, by Kafka's unsecured validator (``alg: none`` tokens, no signature).

A refused token gets RFC 7628's error challenge (``{"status":"invalid_token"}``); the client
answers it with a single ``%x01`` and the exchange then fails, as with Kafka's
OAuthBearerSaslServer.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import jwt

from dataplane.security.sasl.mechanism import Identity, SaslFailure

log = logging.getLogger("rafka.sasl")

_LATEST_EXP_S = 253402300800  # 10000-01-01: beyond that an 'exp' is garbage

_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
# Asymmetric algorithms only: a JWKS publishes public keys, and accepting HS* with a public
# key as the secret is the classic JWT forgery.
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]


class TokenInvalid(Exception):
    """A JWT that does not validate; ``scope`` is set when only the scope was insufficient."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


@dataclass(frozen=True, slots=True)
class Claims:
    principal: str  # the subject claim
    expiry_ms: int


Validate = Callable[[str], Awaitable[Claims]]


def parse_initial_response(message: bytes) -> tuple[str, str]:
    """``n,[a=authzid],%x01auth=Bearer <jwt>%x01[key=value%x01]...%x01`` -> (authzid, jwt)."""
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise SaslFailure("OAUTHBEARER client first message is not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if (
        not sep
        or not gs2.startswith("n,")
        or not gs2.endswith(",")
        or not rest.endswith("\x01\x01")
    ):
        raise SaslFailure("invalid OAUTHBEARER client first message")
    authz = gs2[2:-1]
    if authz and not authz.startswith("a="):
        raise SaslFailure("invalid OAUTHBEARER client first message: malformed authzid")
    pairs = dict(kv.partition("=")[::2] for kv in rest[:-2].split("\x01"))
    auth = pairs.get("auth")
    if auth is None:
        raise SaslFailure("invalid OAUTHBEARER client first message: 'auth' not specified")
    m = _AUTH.fullmatch(auth)
    if m is None or m.group("scheme").lower() != "bearer":
        raise SaslFailure("invalid OAUTHBEARER client first message: invalid 'auth' format")
    return authz[2:], m.group("token")


def _json_part(part: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError):
        raise TokenInvalid("malformed JWT (a part is not base64url JSON)") from None
    if not isinstance(value, dict):
        raise TokenInvalid("malformed JWT (a part is not a JSON object)")
    return value


def _expiry_ms(exp: float) -> int:
    if not exp < _LATEST_EXP_S:  # also NaN
        raise TokenInvalid("the 'exp' claim is implausibly far in the future")
    return int(exp * 1000)


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: an unsigned JWT (``alg: none``)
    whose claims are only checked for sanity; its JAAS options (unsecuredValidator*) apply."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._principal_claim = (
            options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        )
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self._required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip() or "0"
        if not skew.isdigit():
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs must be a non-negative integer: {skew!r}"
            )
        self._skew_ms = int(skew)

    async def __call__(self, token: str) -> Claims:
        return self.validate(token, int(time.time() * 1000))

    def validate(self, token: str, now_ms: int) -> Claims:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenInvalid(f"a JWT has 3 dot-separated parts, this one {len(parts)}")
        header, claims = _json_part(parts[0]), _json_part(parts[1])
        if header.get("alg") != "none" or parts[2]:
            raise TokenInvalid("the unsecured validator takes only unsigned tokens (alg 'none')")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"the {self._principal_claim!r} claim is missing or not a string")
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise TokenInvalid("the 'exp' claim is missing or not a number")
        if iat is not None and (
            not isinstance(iat, int | float) or iat * 1000 > now_ms + self._skew_ms
        ):
            raise TokenInvalid("the 'iat' claim is not a number or lies in the future")
        if exp * 1000 <= now_ms - self._skew_ms:
            raise TokenInvalid("the token has expired")
        if iat is not None and iat > exp:
            raise TokenInvalid("the token's 'iat' is after its 'exp'")
        expiry_ms = _expiry_ms(exp)
        scope = claims.get(self._scope_claim, [])
        granted = set(scope.split() if isinstance(scope, str) else scope)
        if missing := [s for s in self._required_scope if s not in granted]:
            raise TokenInvalid(
                f"the token lacks scope {missing}", scope=" ".join(self._required_scope)
            )
        return Claims(principal, expiry_ms)


class JwksKeys:
    """The keys of a JWKS (https:// or file: URL): loaded on first use, reloaded every refresh
    interval, and at once (at most every few seconds) when a token names a key id it lacks,
    so keys the issuer rotates in are found. A failed reload keeps the keys loaded before."""

    _MISSING_KID_RELOAD_S = 10.0

    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        self._refresh_s = max(refresh_ms / 1000, 1.0)
        self._keys: jwt.PyJWKSet | None = None
        self._loaded = 0.0  # time.monotonic() of the last load attempt
        self._lock = threading.Lock()  # validations run in worker threads

    def key(self, kid: str | None) -> jwt.PyJWK:
        """The key a token names (blocking: may fetch the JWKS)."""
        with self._lock:
            if self._keys is None or time.monotonic() - self._loaded >= self._refresh_s:
                self._load()
            key = self._find(kid)
            if key is None and time.monotonic() - self._loaded >= self._MISSING_KID_RELOAD_S:
                self._load()
                key = self._find(kid)
        if key is None:
            raise TokenInvalid(f"the JWKS at {self.url} has no key with id {kid!r}")
        return key

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        keys = self._keys.keys if self._keys is not None else []
        if kid is None:  # a token without a key id: only a one-key set is unambiguous
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.key_id == kid), None)

    def _load(self) -> None:
        self._loaded = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=10) as response:
                self._keys = jwt.PyJWKSet.from_json(response.read().decode())
        except (OSError, ValueError, jwt.PyJWKSetError) as e:
            if self._keys is None:
                raise TokenInvalid(
                    f"cannot load the JWKS from {self.url} ({e}); check "
                    "sasl.oauthbearer.jwks.endpoint.url"
                ) from None
            log.warning(
                "reloading the JWKS from %s failed (%s); keeping the keys loaded before",
                self.url,
                e,
            )


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: a JWT signed by a key of the JWKS, with
    exp (and nbf, iat) checked with the configured clock skew, the expected audience and
    issuer, and the principal in the subject claim."""

    def __init__(
        self,
        url: str,
        refresh_ms: int,
        audience: list[str],
        issuer: str,
        sub_claim: str,
        clock_skew_s: int,
    ) -> None:
        self.url = url
        self._keys = JwksKeys(url, refresh_ms)
        self._audience = audience
        self._issuer = issuer
        self._sub_claim = sub_claim
        self._skew_s = clock_skew_s

    async def __call__(self, token: str) -> Claims:
        # a JWKS fetch blocks on the network: run it off the event loop
        return await anyio.to_thread.run_sync(self.validate, token)

    def validate(self, token: str) -> Claims:
        try:
            header = jwt.get_unverified_header(token)
            key = self._keys.key(header.get("kid"))
            claims = jwt.decode(
                token,
                key.key,
                algorithms=_ALGORITHMS,
                audience=self._audience or None,
                issuer=self._issuer or None,
                leeway=self._skew_s,
                options={"require": ["exp"], "verify_aud": bool(self._audience)},
            )
        except (jwt.PyJWTError, ValueError, TypeError) as e:  # a hostile token may be anything
            raise TokenInvalid(f"{type(e).__name__}: {e}") from None
        principal = claims.get(self._sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"the {self._sub_claim!r} claim is missing or not a string")
        return Claims(principal, _expiry_ms(claims["exp"]))


class OAuthBearerServer:
    """One OAUTHBEARER exchange."""

    def __init__(self, validate: Validate) -> None:
        self._validate = validate
        self._error = ""  # the error challenge sent, awaiting the client's %x01
        self._reason = ""
        self.identity: Identity | None = None

    async def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error:
            raise SaslFailure(self._reason, public=self._error)
        self._error = ""
        authzid, jwt_text = parse_initial_response(token)
        try:
            claims = await self._validate(jwt_text)
        except TokenInvalid as e:
            self._reason = f"OAUTHBEARER token refused: {e}"
            status = {"status": "insufficient_scope" if e.scope else "invalid_token"}
            if e.scope:
                status["scope"] = e.scope
            self._error = json.dumps(status, separators=(",", ":"))
            return self._error.encode()
        if authzid and authzid != claims.principal:
            raise SaslFailure(
                f"OAUTHBEARER authorization id {authzid!r} is not the token's {claims.principal!r}",
                public=f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({claims.principal})",
            )
        self.identity = Identity(f"User:{claims.principal}", claims.expiry_ms)
        return b""
