"""Kafka's ACL model, shared by the meta service (which stores ACL bindings in its Raft state and
matches DeleteAcls filters against them) and the brokers' authorizer (which matches requests
against them). The enum values are Kafka's wire codes (org.apache.kafka.common.acl,
org.apache.kafka.common.resource).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"  # a resource name, principal ("User:*") or host matching every one
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: `principal` from `host` may (ALLOW) or may not (DENY) do `operation` on the
    resources `pattern_type`/`resource_name` selects."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an IP address
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls filters: None (Kafka's null) and the ANY values match all."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType  # ANY, MATCH, LITERAL or PREFIXED
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType


def filter_matches(f: AclBindingFilter, binding: AclBinding) -> bool:
    """Kafka's AclBindingFilter.matches: the resource pattern filter and the entry filter."""
    if f.resource_type not in (ResourceType.ANY, binding.resource_type):
        return False
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
        return False
    if f.resource_name is not None:
        if f.pattern_type in (PatternType.ANY, binding.pattern_type):
            if f.resource_name != binding.resource_name:
                return False
        elif binding.pattern_type == PatternType.LITERAL:  # MATCH: what applies to the name
            if binding.resource_name not in (f.resource_name, WILDCARD):
                return False
        elif not f.resource_name.startswith(binding.resource_name):  # MATCH of a PREFIXED one
            return False
    return (
        f.principal in (None, binding.principal)
        and f.host in (None, binding.host)
        and f.operation in (AclOperation.ANY, binding.operation)
        and f.permission_type in (AclPermissionType.ANY, binding.permission_type)
    )


E = TypeVar("E", bound=IntEnum)

# The operations each resource type has (Kafka's AclEntry.supportedOperations): what an
# "authorized operations" bit field (Metadata, DescribeGroups) is computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    # DESCRIBE_CONFIGS, ALTER_CONFIGS since Kafka 3.8: group configs
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DELETE,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def enum_code(enum: type[E], code: int) -> E:
    """A wire code as `enum`'s member; a code Kafka does not define is UNKNOWN (as its
    fromCode), which validation then refuses."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


def invalid_filter(f: AclBindingFilter) -> str:
    """Why Kafka refuses a DescribeAcls/DeleteAcls filter (INVALID_REQUEST), "" if it does
    not: an UNKNOWN value (a code Kafka does not define) in any of its enums."""
    if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if f.operation == AclOperation.UNKNOWN or f.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return ""
