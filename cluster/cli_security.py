"""`rafka acls` and `rafka users`: ACLs (as kafka-acls.sh) and SCRAM users (as kafka-configs.sh
--entity-type users), over the Kafka API."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Annotated

import typer

from cluster.cli_common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOpt,
    CommandConfigOpt,
    admin_errors,
    brokers,
    print_table,
    report,
)

if TYPE_CHECKING:
    from meta.acl import AclBinding, AclBindingFilter, ResourceType


# ---------------------------------------------------------------- ACLs and SCRAM users

acls_app = typer.Typer(
    no_args_is_help=True, help="List, add and remove ACLs (as kafka-acls.sh does)."
)
users_app = typer.Typer(
    no_args_is_help=True, help="List, create and delete SCRAM users (as kafka-configs.sh does)."
)


def _enum(enum: type[IntEnum], text: str, what: str) -> IntEnum:
    """Kafka's spellings of an ACL enum value: Write, WRITE, AlterConfigs, alter-configs."""
    wanted = text.replace("-", "").replace("_", "").lower()
    for member in enum:
        if member.name.replace("_", "").lower() == wanted:
            return member
    names = ", ".join(m.name for m in enum if m.name not in ("UNKNOWN", "ANY", "MATCH"))
    raise typer.BadParameter(f"unknown {what} {text!r}; one of {names}")


def acl_resources(
    topic: list[str] | None,
    group: list[str] | None,
    transactional_id: list[str] | None,
    delegation_token: list[str] | None,
    cluster: bool,
) -> list[tuple[ResourceType, str]]:
    """The resources named on the command line (kafka-acls.sh's --topic, --group, ...)."""
    from meta.acl import CLUSTER_NAME, ResourceType

    named = [
        (ResourceType.TOPIC, topic),
        (ResourceType.GROUP, group),
        (ResourceType.TRANSACTIONAL_ID, transactional_id),
        (ResourceType.DELEGATION_TOKEN, delegation_token),
    ]
    out = [(rtype, name) for rtype, names in named for name in names or []]
    return out + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])


def acl_bindings(
    resources: list[tuple[ResourceType, str]],
    pattern: str,
    allow: list[str],
    deny: list[str],
    hosts: list[str],
    operations: list[str],
) -> list[AclBinding]:
    """kafka-acls.sh --add: every principal x host x operation x resource."""
    from meta.acl import AclBinding, AclOperation, AclPermissionType, PatternType

    pattern_type = _enum(PatternType, pattern, "resource pattern type")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise typer.BadParameter("--resource-pattern-type must be literal or prefixed to add")
    if not resources or not (allow or deny) or not operations:
        raise typer.BadParameter(
            "add needs a resource (--topic, --group, --cluster, ...), --allow-principal or "
            "--deny-principal, and --operation"
        )
    ops = [_enum(AclOperation, op, "operation") for op in operations]
    principals = [(p, AclPermissionType.ALLOW) for p in allow]
    principals += [(p, AclPermissionType.DENY) for p in deny]
    for principal, _ in principals:
        _check_principal(principal)
    return [
        AclBinding(rtype, name, PatternType(pattern_type), principal, host, AclOperation(op), perm)
        for rtype, name in resources
        for principal, perm in principals
        for host in hosts or ["*"]
        for op in ops
    ]


def acl_filters(
    resources: list[tuple[ResourceType, str]],
    pattern: str,
    principals: list[str],
    hosts: list[str],
    operations: list[str],
) -> list[AclBindingFilter]:
    """kafka-acls.sh --list/--remove: what is not given matches anything (no resource: every
    resource)."""
    from meta.acl import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    pattern_type = PatternType(_enum(PatternType, pattern, "resource pattern type"))
    targets: list[tuple[ResourceType, str | None]] = list(resources) or [(ResourceType.ANY, None)]
    for principal in principals:
        _check_principal(principal)
    anyone: list[str | None] = [None]  # Kafka's null: matches every value
    return [
        AclBindingFilter(
            rtype,
            name,
            pattern_type,
            principal,
            host,
            AclOperation(_enum(AclOperation, op, "operation")) if op else AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for rtype, name in targets
        for principal in principals or anyone
        for host in hosts or anyone
        for op in operations or anyone
    ]


def _check_principal(principal: str) -> None:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise typer.BadParameter(f"principal {principal!r}: expected Type:name, e.g. User:alice")


def print_acls(bindings: list[AclBinding]) -> None:
    print_table(
        None,
        ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
        [
            [
                b.resource_type.name,
                b.resource_name,
                b.pattern_type.name,
                b.principal,
                b.host,
                b.operation.name,
                b.permission_type.name,
            ]
            for b in sorted(bindings, key=lambda b: (b.resource_type, b.resource_name, b.principal))
        ],
    )


TopicOpt = Annotated[list[str] | None, typer.Option("--topic", help="Topic; repeatable.")]
GroupOpt = Annotated[list[str] | None, typer.Option("--group", help="Group; repeatable.")]
TxnOpt = Annotated[
    list[str] | None, typer.Option("--transactional-id", help="Transactional id; repeatable.")
]
TokenOpt = Annotated[
    list[str] | None, typer.Option("--delegation-token", help="Token id; repeatable.")
]
ClusterFlag = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
OperationOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--operation",
        help="Read, Write, Create, Delete, Alter, Describe, "
        "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All; repeatable.",
    ),
]
HostOpt = Annotated[list[str] | None, typer.Option("--host", help="Client IP (default: *).")]


@acls_app.command("list")
def acls_list(
    topic: TopicOpt = None,
    group: GroupOpt = None,
    transactional_id: TxnOpt = None,
    delegation_token: TokenOpt = None,
    cluster: ClusterFlag = False,
    principal: Annotated[list[str] | None, typer.Option(help="Type:name; repeatable.")] = None,
    resource_pattern_type: Annotated[
        str, typer.Option(help="any, match, literal or prefixed.")
    ] = "any",
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """The ACLs (all of them, or those of the given resources / principals)."""
    from cluster import admin

    resources = acl_resources(topic, group, transactional_id, delegation_token, cluster)
    filters = acl_filters(resources, resource_pattern_type, principal or [], [], [])
    with admin_errors():
        target = brokers(bootstrap, command_config)
        found = {b for f in filters for b in admin.describe_acls(target, f)}
    print_acls(list(found))


@acls_app.command("add")
def acls_add(
    allow_principal: Annotated[
        list[str] | None, typer.Option(help="Type:name allowed; repeatable.")
    ] = None,
    deny_principal: Annotated[
        list[str] | None, typer.Option(help="Type:name denied; repeatable.")
    ] = None,
    operation: OperationOpt = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    transactional_id: TxnOpt = None,
    delegation_token: TokenOpt = None,
    cluster: ClusterFlag = False,
    host: HostOpt = None,
    resource_pattern_type: Annotated[str, typer.Option(help="literal or prefixed.")] = "literal",
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Add ACLs: each principal x host x operation on each resource."""
    from cluster import admin

    resources = acl_resources(topic, group, transactional_id, delegation_token, cluster)
    bindings = acl_bindings(
        resources,
        resource_pattern_type,
        allow_principal or [],
        deny_principal or [],
        host or [],
        operation or [],
    )
    with admin_errors():
        results = admin.create_acls(brokers(bootstrap, command_config), bindings)
    print_acls([b for b, error in zip(bindings, results, strict=True) if error is None])
    report({str(b): e for b, e in zip(bindings, results, strict=True) if e is not None}, "")


@acls_app.command("remove")
def acls_remove(
    topic: TopicOpt = None,
    group: GroupOpt = None,
    transactional_id: TxnOpt = None,
    delegation_token: TokenOpt = None,
    cluster: ClusterFlag = False,
    principal: Annotated[
        list[str] | None, typer.Option(help="Type:name (default: any); repeatable.")
    ] = None,
    operation: OperationOpt = None,
    host: HostOpt = None,
    resource_pattern_type: Annotated[
        str, typer.Option(help="literal, prefixed, match or any.")
    ] = "literal",
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Remove the ACLs of the given resources (narrowed by principal, host, operation)."""
    from cluster import admin

    resources = acl_resources(topic, group, transactional_id, delegation_token, cluster)
    if not resources:
        raise typer.BadParameter("remove needs a resource (--topic, --group, --cluster, ...)")
    filters = acl_filters(
        resources, resource_pattern_type, principal or [], host or [], operation or []
    )
    with admin_errors():
        results = admin.delete_acls(brokers(bootstrap, command_config), filters)
    removed = [b for _, deleted in results for b in deleted]
    typer.echo(f"Removed {len(removed)} ACL(s).")
    if removed:
        print_acls(removed)
    report({f"filter {i}": e for i, (e, _) in enumerate(results) if e is not None}, "")


MechanismOpt = Annotated[
    list[str] | None,
    typer.Option("--mechanism", help="SCRAM-SHA-256 or SCRAM-SHA-512; repeatable."),
]


@users_app.command("list")
def users_list(
    users: Annotated[list[str] | None, typer.Argument(help="Users (default: all).")] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """SCRAM users, with their mechanisms and iteration counts (never the keys)."""
    from cluster import admin

    with admin_errors():
        found = admin.describe_users(brokers(bootstrap, command_config), users or None)
    print_table(
        None,
        ["USER", "MECHANISM", "ITERATIONS"],
        [[u.user, m, i] for u in found for m, i in u.credentials],
    )


def _mechanisms(mechanism: list[str] | None) -> list[str]:
    from dataplane.security.sasl.scram import SCRAM_MECHANISMS

    chosen = [m.upper() for m in mechanism or list(SCRAM_MECHANISMS)]
    for m in chosen:
        if m not in SCRAM_MECHANISMS:
            raise typer.BadParameter(f"mechanism {m}: SCRAM-SHA-256 or SCRAM-SHA-512")
    return chosen


@users_app.command("create")
def users_create(
    user: str,
    password: Annotated[
        str, typer.Option(prompt=True, hide_input=True, envvar="RAFKA_USER_PASSWORD")
    ],
    mechanism: MechanismOpt = None,
    iterations: Annotated[int, typer.Option(min=4096, max=16384)] = 4096,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Create or update a user's SCRAM credentials (default: both mechanisms). The password
    is salted and hashed here; only the salted password is sent."""
    from cluster import admin

    upserts = [(user, m, password, iterations) for m in _mechanisms(mechanism)]
    with admin_errors():
        results = admin.alter_users(brokers(bootstrap, command_config), upserts, [])
    report(results, "Set SCRAM credentials of")


@users_app.command("delete")
def users_delete(
    users: list[str],
    mechanism: MechanismOpt = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Delete users' SCRAM credentials (default: every mechanism each user has)."""
    from cluster import admin

    with admin_errors():
        target = brokers(bootstrap, command_config)
        if mechanism:
            deletions = [(u, m) for u in users for m in _mechanisms(mechanism)]
        else:
            known = {u.user: u for u in admin.describe_users(target)}
            missing = [u for u in users if u not in known]
            if missing:
                typer.echo(f"rafka: no SCRAM credentials for {', '.join(missing)}", err=True)
                raise typer.Exit(1)
            deletions = [(u, m) for u in users for m, _ in known[u].credentials]
        results = admin.alter_users(target, [], deletions)
    report(results, "Deleted SCRAM credentials of")
