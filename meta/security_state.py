"""The security metadata of the state machine: ACL bindings (Kafka's AclControlManager),
SCRAM credentials (ScramControlManager) and delegation tokens (DelegationTokenControlManager).

Brokers derive the SCRAM keys and make the tokens; the checks here are Kafka's controller-side
ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from meta.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    filter_matches,
    invalid_filter,
)
from meta.commands import (
    AclDeleteOutcome,
    AlterScramCredentials,
    CreateAcls,
    CreateDelegationToken,
    DeleteAcls,
    ExpireDelegationToken,
    Outcome,
    RemoveExpiredTokens,
    RenewDelegationToken,
    ScramOutcome,
    TokenOutcome,
)
from meta.model import DelegationToken, ScramCredential
from meta.protocol import ErrorCode

if TYPE_CHECKING:
    from meta.state import Changes, MetaState

# The state machine's logger, whichever module applies the command.
log = logging.getLogger("rafka.meta.state")

# SCRAM mechanisms (Kafka's ScramMechanism) and the iteration bounds Kafka's controller accepts.
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384


def _create_acls(state: MetaState, cmd: CreateAcls, changes: Changes) -> list[Outcome]:
    """Kafka's AclControlManager.createAcls: each binding is validated on its own; one already
    present succeeds without being added again."""
    outcomes, added = [], []
    for binding in cmd.bindings:
        if invalid := _invalid_acl(binding):
            log.warning("Refused to create ACL %s: %s", binding, invalid)
            outcomes.append(Outcome(ErrorCode.INVALID_REQUEST, invalid))
            continue
        if binding not in state.acls:
            state.acls[binding] = None
            added.append(binding)
            log.info("Created ACL %s", binding)
        outcomes.append(Outcome())
    changes.acls(tuple(added), ())
    return outcomes


def _invalid_acl(binding: AclBinding) -> str:
    """Why Kafka refuses to store ``binding`` (INVALID_REQUEST), "" if it does not: the
    broker's checks of the resource name (AclApis, first), the controller's validateNewAcl
    with its parseable principal, and Kafka 4.4's check of the host."""
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.resource_name:
        return "Invalid empty resource name"
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission_type.name}"
    if ":" not in binding.principal:
        return (
            f"Could not parse principal from `{binding.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    if not binding.host:
        return "Host pattern cannot be null or empty"
    return ""


def _delete_acls(state: MetaState, cmd: DeleteAcls, changes: Changes) -> list[AclDeleteOutcome]:
    """Kafka's AclControlManager.deleteAcls: every filter is matched against the bindings as
    they were before the request, so a binding two filters match is reported by both."""
    outcomes, removed = [], {}
    for f in cmd.filters:
        if invalid := invalid_filter(f):
            outcomes.append(AclDeleteOutcome(ErrorCode.INVALID_REQUEST, invalid))
        else:
            deleted = tuple(b for b in state.acls if filter_matches(f, b))
            removed.update(dict.fromkeys(deleted))
            outcomes.append(AclDeleteOutcome(deleted=deleted))
    for binding in removed:
        del state.acls[binding]
        log.info("Deleted ACL %s", binding)
    changes.acls((), tuple(removed))
    return outcomes


def _alter_scram_credentials(
    state: MetaState, cmd: AlterScramCredentials, changes: Changes
) -> list[ScramOutcome]:
    """Kafka's AlterUserScramCredentials: one result per user (in request order, deletions
    first); a user's alterations are applied together, or none of them if one is refused."""
    alterations: list[tuple[str, str, ScramCredential | None]] = [
        (user, mechanism, None) for user, mechanism in cmd.deletions
    ] + list(cmd.upserts)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: set[tuple[str, str]] = set()
    for user, mechanism, credential in alterations:
        error = _invalid_scram_alteration(state, user, mechanism, credential, seen)
        seen.add((user, mechanism))
        if error is not None and user not in errors:
            errors[user] = error
    results: dict[str, ScramOutcome] = {}
    for user, mechanism, credential in alterations:
        if user in errors:
            code, message = errors[user]
            log.warning("Refused to alter SCRAM credentials of user %s: %s", user, message)
            results[user] = ScramOutcome(user, code, message)
            continue
        if credential is None:
            del state.scram_credentials[user, mechanism]
            log.info("Deleted the %s credential of user %s", mechanism, user)
        else:
            state.scram_credentials[user, mechanism] = credential
            log.info("Stored the %s credential of user %s", mechanism, user)
        changes.scram(user, mechanism)
        results[user] = ScramOutcome(user)
    return list(results.values())


def _invalid_scram_alteration(
    state: MetaState,
    user: str,
    mechanism: str,
    credential: ScramCredential | None,
    seen: set[tuple[str, str]],
) -> tuple[ErrorCode, str] | None:
    """Kafka's ScramControlManager checks of one upsert (or deletion: ``credential`` None)."""
    if (user, mechanism) in seen:
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if credential is None:
        if (user, mechanism) not in state.scram_credentials:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
    elif credential.iterations < SCRAM_MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    elif credential.iterations > SCRAM_MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _create_delegation_token(
    state: MetaState, cmd: CreateDelegationToken, changes: Changes
) -> TokenOutcome:
    token = cmd.token
    if token.token_id in state.delegation_tokens:
        message = f"A delegation token with id {token.token_id} already exists."
        log.warning("Refused to create a delegation token: %s", message)
        return TokenOutcome(ErrorCode.INVALID_REQUEST, message)
    state.delegation_tokens[token.token_id] = token
    changes.token(token.token_id)
    log.info("Created delegation token %s for %s", token.token_id, token.owner)
    return TokenOutcome(expiry_ms=token.expiry_ms)


def _renew_delegation_token(
    state: MetaState, cmd: RenewDelegationToken, changes: Changes
) -> TokenOutcome:
    token, refusal = _token_to_change(state, cmd.hmac, cmd.principal, cmd.now_ms, changes)
    if token is None:
        return refusal
    expiry_ms = min(token.max_ms, cmd.now_ms + cmd.renew_period_ms)
    state.delegation_tokens[token.token_id] = replace(token, expiry_ms=expiry_ms)
    changes.token(token.token_id)
    log.info("Renewed delegation token %s until %d", token.token_id, expiry_ms)
    return TokenOutcome(expiry_ms=expiry_ms)


def _expire_delegation_token(
    state: MetaState, cmd: ExpireDelegationToken, changes: Changes
) -> TokenOutcome:
    """Kafka's expire: a negative period removes the token now (and answers now as its expiry,
    as KRaft does); otherwise it expires after the period, not past max_ms."""
    token, refusal = _token_to_change(state, cmd.hmac, cmd.principal, cmd.now_ms, changes)
    if token is None:
        return refusal
    if cmd.expiry_period_ms < 0:
        del state.delegation_tokens[token.token_id]
        changes.token(token.token_id)
        log.info("Expired delegation token %s", token.token_id)
        return TokenOutcome(expiry_ms=cmd.now_ms)
    expiry_ms = min(token.max_ms, cmd.now_ms + cmd.expiry_period_ms)
    state.delegation_tokens[token.token_id] = replace(token, expiry_ms=expiry_ms)
    changes.token(token.token_id)
    log.info("Delegation token %s now expires at %d", token.token_id, expiry_ms)
    return TokenOutcome(expiry_ms=expiry_ms)


def _token_to_change(
    state: MetaState, hmac: bytes, principal: str, now_ms: int, changes: Changes
) -> tuple[DelegationToken | None, TokenOutcome]:
    """The token ``principal`` may renew or expire, or (None, why not) with Kafka's errors. An
    expired token is removed on the way."""
    token = next((t for t in state.delegation_tokens.values() if t.hmac == hmac), None)
    if token is None:
        refusal = TokenOutcome(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, "Delegation token not found.")
    elif token.expiry_ms < now_ms or token.max_ms < now_ms:
        _remove_tokens(state, [token], changes)
        refusal = TokenOutcome(
            ErrorCode.DELEGATION_TOKEN_EXPIRED, f"Delegation token {token.token_id} has expired."
        )
    elif not token.may_renew(principal):
        refusal = TokenOutcome(
            ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH,
            f"{principal} is neither the owner nor a renewer of delegation token {token.token_id}.",
        )
    else:
        return token, TokenOutcome()
    log.warning("Refused to change a delegation token: %s", refusal.error_message)
    return None, refusal


def _remove_expired_tokens(state: MetaState, cmd: RemoveExpiredTokens, changes: Changes) -> int:
    expired = [
        t for t in state.delegation_tokens.values() if min(t.expiry_ms, t.max_ms) < cmd.now_ms
    ]
    _remove_tokens(state, expired, changes)
    return len(expired)


def _remove_tokens(state: MetaState, tokens: list[DelegationToken], changes: Changes) -> None:
    for token in tokens:
        del state.delegation_tokens[token.token_id]
        changes.token(token.token_id)
        log.info("Removed delegation token %s: it expired at %d", token.token_id, token.expiry_ms)


APPLIERS: dict[type, Callable[[MetaState, Any, Changes], Any]] = {
    CreateAcls: _create_acls,
    DeleteAcls: _delete_acls,
    AlterScramCredentials: _alter_scram_credentials,
    CreateDelegationToken: _create_delegation_token,
    RenewDelegationToken: _renew_delegation_token,
    ExpireDelegationToken: _expire_delegation_token,
    RemoveExpiredTokens: _remove_expired_tokens,
}
