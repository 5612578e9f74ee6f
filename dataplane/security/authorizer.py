"""Kafka's StandardAuthorizer over the ACLs of the metadata cache.

`authorizer.class.name` turns it on. The ACL set arrives through the meta service's watch
stream (`cache.acls`, replaced whole on every change, `cache.acl_version` bumped); the index
is rebuilt when the version moves, and decisions are memoised per (principal, host,
operation, resource) until it moves again, so a handler pays about a dict lookup per topic
and operation of a request — never per record. With the authorizer off, `enabled` is False
and every helper answers at once.

The rules (StandardAuthorizerData): super users may do anything; otherwise the ACLs whose
pattern covers the resource (the literal name, the "*" wildcard, every prefix of the name)
and whose principal ("User:*" for all) and host ("*" for all) match decide: a DENY wins over
any ALLOW; an ALLOW of ALL, or of READ/WRITE/DELETE/ALTER for DESCRIBE, or of ALTER_CONFIGS
for DESCRIBE_CONFIGS, grants. When no ACL at all covers the resource the answer is
`allow.everyone.if.no.acl.found`; when some do but none grants, it is a denial.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from dataplane.protocol.primitives import AUTHORIZED_OPERATIONS_OMITTED
from meta.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

if TYPE_CHECKING:
    from dataplane.config import BrokerConfig
    from dataplane.connection import Connection
    from dataplane.metadata_cache import MetadataCache

log = logging.getLogger("rafka.authorizer")

# authorizer.class.name values that mean this authorizer (the KRaft one, and ZooKeeper-era
# configurations carried over).
STANDARD_AUTHORIZERS = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
    }
)
WILDCARD_PRINCIPAL = "User:*"

# An ALLOW of the key grants these operations too (only ALLOW: a DENY of READ denies READ).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
_MEMO_LIMIT = 100_000  # decisions kept between ACL changes (then the memo starts over)
_DENIAL_LOG_INTERVAL_S = 60.0  # a client retrying a denied request logs once a minute


class AuthorizerConfigError(ValueError):
    """The authorizer settings are unusable; the message says which and what to do."""


class _Key(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    resource_type: ResourceType
    name: str


class _Index:
    """The ACLs by resource: literal (type, name) — the "*" wildcard is one such name — and
    prefixed (type, prefix) with each type's prefix lengths, so that the prefixes of a name
    are a few dict lookups."""

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        self.literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self.prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        self.count = 0
        for acl in acls:
            self.count += 1
            key = (acl.resource_type, acl.resource_name)
            if acl.pattern_type == PatternType.PREFIXED:
                self.prefixed.setdefault(key, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
            else:
                self.literal.setdefault(key, []).append(acl)
        self.prefix_lengths = {t: sorted(ls) for t, ls in lengths.items()}

    def covering(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern covers the resource, whoever it is for."""
        found = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self.literal.get((resource_type, WILDCARD), ())
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found += self.prefixed.get((resource_type, name[:length]), ())
        return found


def _applies(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> bool:
    """Whether `acl` speaks about this principal, host and operation (its resource covers
    the one asked about)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation == AclOperation.ALL or acl.operation == operation:
        return True
    implied = _IMPLIED_BY.get(operation)
    return (
        implied is not None
        and acl.permission_type == AclPermissionType.ALLOW
        and acl.operation in implied
    )


class Authorizer:
    """What a connection's principal may do, from the ACLs in the metadata cache."""

    def __init__(self, config: BrokerConfig, cache: MetadataCache) -> None:
        class_name = config.authorizer_class_name.strip()
        if class_name and class_name not in STANDARD_AUTHORIZERS:
            raise AuthorizerConfigError(
                f"authorizer.class.name={class_name} is not supported: set it to "
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the meta "
                "service) or leave it empty (no authorization)"
            )
        self.enabled = bool(class_name)
        self.super_users = frozenset(u.strip() for u in config.super_users.split(";") if u.strip())
        for user in self.super_users:
            if ":" not in user:
                raise AuthorizerConfigError(
                    f"super.users entry {user!r} is not a principal: write it as User:<name>"
                )
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._cache = cache
        self._version = -1
        self._index = _Index(())
        self._memo: dict[_Key, bool] = {}
        self._denials_logged: dict[_Key, float] = {}
        if self.enabled:
            log.info(
                "authorization on (%s): super.users=%s, allow.everyone.if.no.acl.found=%s",
                class_name,
                ",".join(sorted(self.super_users)) or "none",
                self.allow_if_no_acl,
            )

    # -- decisions ---------------------------------------------------------------------------

    def authorize(
        self,
        conn: Connection,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Whether `conn`'s principal may do `operation` on the resource. A denial is logged
        (at most once a minute for the same principal, host, operation and resource) unless
        `log_denied` is False: the caller only filters what it shows (Kafka's logIfDenied)."""
        if not self.enabled:
            return True
        self._refresh()
        key = _Key(conn.principal, conn.host, operation, resource_type, name)
        allowed = self._memo.get(key)
        if allowed is None:
            allowed = self._decide(key)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = allowed
        if not allowed:
            self._log_denial(key, log_denied)
        return allowed

    def denied(
        self,
        conn: Connection,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_denied: bool = True,
    ) -> frozenset[str]:
        """The names among `names` `conn` may not `operation` (each checked once); empty
        without an authorizer."""
        if not self.enabled:
            return frozenset()
        return frozenset(
            name
            for name in set(names)
            if not self.authorize(conn, operation, resource_type, name, log_denied=log_denied)
        )

    def authorized_operations(
        self, conn: Connection, resource_type: ResourceType, name: str
    ) -> int:
        """The operations of the resource `conn` may do, as the bit field of Metadata's and
        DescribeGroups' authorized operations (bit = AclOperation code); every supported one
        without an authorizer."""
        return sum(
            1 << op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(conn, op, resource_type, name, log_denied=False)
        )

    def authorize_any(
        self, conn: Connection, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether `conn` may do `operation` on some resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer needs WRITE on some topic). An ALLOW
        counts unless a DENY covers it: the same literal name or a prefix of it, or "*"."""
        if not self.enabled:
            return True
        # A super user, a wildcard ALLOW or a type nobody wrote ACLs for: as for any name.
        if self.authorize(conn, operation, resource_type, "hardcode", log_denied=False):
            return True
        self._refresh()
        allow: list[AclBinding] = []
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        for acl in self._cache.acls:
            if acl.resource_type != resource_type or not (
                acl.operation in (operation, AclOperation.ALL)
                and acl.principal in (conn.principal, WILDCARD_PRINCIPAL)
                and acl.host in (conn.host, WILDCARD)
            ):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission_type == AclPermissionType.DENY:
                if literal and acl.resource_name == WILDCARD:
                    return self._by_type_denied(conn, operation, resource_type)
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                if literal and acl.resource_name == WILDCARD:
                    return True
                allow.append(acl)
        for acl in allow:
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        return self._by_type_denied(conn, operation, resource_type)

    def _by_type_denied(
        self, conn: Connection, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        self._log_denial(_Key(conn.principal, conn.host, operation, resource_type, "*any*"), True)
        return False

    # -- internals ---------------------------------------------------------------------------

    def _refresh(self) -> None:
        version = self._cache.acl_version
        if version != self._version:
            self._index = _Index(self._cache.acls)
            self._version = version
            self._memo.clear()
            log.info("authorizer: %d ACL(s) in force", self._index.count)

    def _decide(self, key: _Key) -> bool:
        if key.principal in self.super_users:
            return True
        covering = self._index.covering(key.resource_type, key.name)
        if not covering:
            return self.allow_if_no_acl
        allowed = False
        for acl in covering:
            if _applies(acl, key.principal, key.host, key.operation):
                if acl.permission_type == AclPermissionType.DENY:
                    return False
                allowed = allowed or acl.permission_type == AclPermissionType.ALLOW
        return allowed

    def _log_denial(self, key: _Key, log_denied: bool) -> None:
        now = time.monotonic()
        if not log_denied or now - self._denials_logged.get(key, -_DENIAL_LOG_INTERVAL_S) < (
            _DENIAL_LOG_INTERVAL_S
        ):
            log.debug(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                key.principal,
                key.operation.name,
                key.host,
                key.resource_type.name,
                key.name,
            )
            return
        if len(self._denials_logged) >= _MEMO_LIMIT:
            self._denials_logged.clear()
        self._denials_logged[key] = now
        log.info(
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s "
            "(no ACL allows it, or one denies it: see `rafka acls list`)",
            key.principal,
            key.operation.name,
            key.host,
            key.resource_type.name,
            key.name,
        )


def cluster_operations(authorizer: Authorizer, conn: Connection, requested: bool) -> int:
    """The cluster's authorized operations of Metadata (v8-v10) and DescribeCluster, as Kafka's
    KafkaApis answers them: unknown when not requested, none without DESCRIBE on the cluster,
    else the operations `conn` may do on it."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorizer.authorize(conn, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return authorizer.authorized_operations(conn, ResourceType.CLUSTER, CLUSTER_NAME)
