"""The `rafka` command: start a local cluster, run one meta node or one broker, administer.

    rafka up [--brokers 3] [--meta 3] [--data-dir ./data] [--base-port 9092]
             [--security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL]
    rafka meta   [--config meta.properties]   [-o key=value ...]
    rafka broker [--config server.properties] [-o key=value ...]
    rafka cluster                                   # meta quorum, brokers, partition health
    rafka topics list | describe [TOPIC...] | create NAME [-p N] [-r N] [--config k=v] | delete
                 | alter NAME --partitions N [--replica-assignment 1:2,2:3]
    rafka records delete --topic T --partition P --offset O | --offset-json-file FILE
    rafka groups list | describe GROUP | delete GROUP...
    rafka transactions list [--state S] [--producer-id P] [--duration-ms D]
                     | describe TRANSACTIONAL_ID...
    rafka acls list | add | remove  [--allow-principal P] [--operation OP] [--topic T] ...
    rafka users list | create USER [--mechanism M] | delete USER...
    rafka partitions reassign --topic T --partition P --replicas 2,3,4 | --cancel
                   | list-reassignments [--topic T [--partition P]]
                   | elect [--type preferred|unclean] [--topic T [--partition P ...]]
    rafka logdirs describe [--broker ID]
    rafka features [describe] | upgrade|downgrade --feature F --version N [--dry-run]
    rafka configs describe|alter --topic T | --broker ID | --broker-defaults | --broker-logger ID
                  [--all] [--add-config k=v,k2=[a,b]] [--delete-config k,...]

Admin commands take `--command-config FILE`: the client's security settings in a Java
.properties file, as Kafka's tools do (security.protocol, sasl.mechanism, sasl.jaas.config,
ssl.truststore.location with ssl.truststore.type=PEM, ...); the commands that ask the meta
service (cluster, groups list) take its internal.* credentials from it too (a local cluster's
are in <data-dir>/internal.properties).
Settings use Kafka's names; see README.md for the list and for RAFKA_* environment variables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from cluster.admin import Brokers, Meta, TransactionDescription
    from meta.acl import AclBinding, AclBindingFilter, ResourceType

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Rafka: a Kafka-compatible streaming platform.",
)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="Java-style .properties file.")
]
OverrideOpt = Annotated[
    list[str] | None,
    typer.Option("--override", "-o", help="key=value with a Kafka setting name; repeatable."),
]
LogLevelOpt = Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")]


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


class SecurityProtocol(StrEnum):
    """The protocol of the brokers' client listener under `rafka up`."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


@app.command()
def up(
    brokers: Annotated[int, typer.Option(min=1, help="Number of brokers.")] = 3,
    meta: Annotated[int, typer.Option(help="Number of meta (Raft) nodes: 1 or 3.")] = 3,
    data_dir: Annotated[Path, typer.Option(help="Where data, configs and logs go.")] = Path(
        "./data"
    ),
    base_port: Annotated[
        int, typer.Option(help="First broker port; see README for the others.")
    ] = 9092,
    override: OverrideOpt = None,
    log_level: LogLevelOpt = "INFO",
    security_protocol: Annotated[
        SecurityProtocol,
        typer.Option(
            help="Protocol (and listener name) of every broker's client listener. SSL and "
            "SASL_SSL without ssl.keystore.* overrides use a development CA under "
            "<data-dir>/tls (clients trust <data-dir>/tls/ca.pem)."
        ),
    ] = SecurityProtocol.PLAINTEXT,
) -> None:
    """Start a local cluster as separate processes; Ctrl-C or SIGTERM stops it cleanly."""
    from cluster.local import LocalCluster

    if meta not in (1, 3):
        raise typer.BadParameter("--meta must be 1 or 3")
    setup_logging(log_level)
    try:
        LocalCluster(
            brokers,
            meta,
            data_dir,
            base_port,
            parse_overrides(override),
            log_level,
            security_protocol=security_protocol.value,
        ).run()
    except (RuntimeError, TimeoutError, ValueError) as e:
        typer.echo(f"rafka up failed: {e}", err=True)
        raise typer.Exit(1) from None


@app.command("meta")
def meta_node(
    config: ConfigOpt = None, override: OverrideOpt = None, log_level: LogLevelOpt = "INFO"
) -> None:
    """Run one node of the Raft metadata service."""
    from meta.config import MetaConfig
    from meta.node import MetaStartupError, run_meta_node

    setup_logging(log_level)
    try:
        run_meta_node(MetaConfig.load(config, parse_overrides(override)))
    except MetaStartupError:
        raise typer.Exit(1) from None  # already logged with what to do


@app.command()
def broker(
    config: ConfigOpt = None, override: OverrideOpt = None, log_level: LogLevelOpt = "INFO"
) -> None:
    """Run one broker."""
    from dataplane.broker import run_broker
    from dataplane.config import BrokerConfig

    setup_logging(log_level)
    run_broker(BrokerConfig.load(config, parse_overrides(override)))


# ---------------------------------------------------------------- admin commands

topics_app = typer.Typer(no_args_is_help=True, help="List, describe, create and delete topics.")
groups_app = typer.Typer(no_args_is_help=True, help="List, describe and delete consumer groups.")
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")

BootstrapOpt = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "-b",
        envvar="RAFKA_BOOTSTRAP_SERVER",
        help="Broker addresses, comma-separated.",
    ),
]
MetaOpt = Annotated[
    str,
    typer.Option(
        "--meta",
        envvar="RAFKA_META_BOOTSTRAP_SERVERS",
        help="Meta service gRPC addresses, comma-separated.",
    ),
]
CommandConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        envvar="RAFKA_COMMAND_CONFIG",
        help="Client security settings (.properties: security.protocol, sasl.mechanism, "
        "sasl.jaas.config, ssl.truststore.location, ...), as Kafka's tools take them; "
        "internal.* entries are the credentials of the meta service's gRPC.",
    ),
]
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_META = "127.0.0.1:9192"


@contextmanager
def admin_errors() -> Iterator[None]:
    """What the cluster refused or could not answer, said in one line; exit status 1."""
    from cluster.admin import AdminError
    from cluster.client_security import SecurityConfigError
    from cluster.internal_security import InternalSecurityError
    from meta.client import MetaError

    try:
        yield
    except (
        AdminError,
        MetaError,
        SecurityConfigError,
        InternalSecurityError,
        ConnectionError,
        TimeoutError,
        OSError,
    ) as e:
        typer.echo(f"rafka: {e}", err=True)
        raise typer.Exit(1) from None


def brokers(bootstrap: str, command_config: Path | None) -> Brokers:
    """The brokers to ask, with the security settings of `--command-config`."""
    from cluster.admin import Brokers
    from cluster.client_security import ClientSecurity

    if command_config is None:
        return Brokers(bootstrap)
    return Brokers(bootstrap, ClientSecurity.from_file(command_config))


def meta_service(servers: str, command_config: Path | None) -> Meta:
    """The meta service, with the `internal.*` credentials of `--command-config`."""
    from cluster.admin import Meta
    from cluster.internal_security import InternalSecurity

    if command_config is None:
        return Meta(servers)
    return Meta(servers, InternalSecurity.from_file(command_config))


def print_table(title: str | None, columns: list[str], rows: list[list[object]]) -> None:
    from rich.console import Console
    from rich.table import Table

    if title:
        typer.echo(title)
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    Console(width=200).print(table)


def _ids(nodes: list[int]) -> str:
    return ",".join(map(str, nodes))


@app.command("cluster")
def cluster_status(
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    meta: MetaOpt = DEFAULT_META,
) -> None:
    """The meta quorum, the brokers and the health of the partitions."""
    from cluster import admin

    with admin_errors():
        q = admin.quorum(meta_service(meta, command_config))
        info = admin.metadata(brokers(bootstrap, command_config))
    print_table(
        f"cluster {q.cluster_id}: meta leader {q.leader if q.leader >= 0 else 'none'}",
        ["META NODE", "ADDRESS", "ROLE"],
        [list(n) for n in q.nodes],
    )
    print_table(
        f"brokers (controller {info.controller})",
        ["BROKER", "ADDRESS"],
        [[node, address] for node, address in info.brokers.items()],
    )
    parts = [(t, p) for t in info.topics for p in t.partitions]
    offline = [f"{t.name}-{p.partition}" for t, p in parts if p.leader < 0]
    under = [f"{t.name}-{p.partition}" for t, p in parts if len(p.isr) < len(p.replicas)]
    typer.echo(
        f"{len(info.topics)} topics, {len(parts)} partitions: {len(offline)} offline, "
        f"{len(under)} under-replicated"
    )
    for label, names in (("offline", offline), ("under-replicated", under)):
        if names:
            typer.echo(f"  {label}: {', '.join(names[:20])}" + (" ..." if len(names) > 20 else ""))


@topics_app.command("list")
def topics_list(
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP, command_config: CommandConfigOpt = None
) -> None:
    """Topic names, partitions and replication factor."""
    from cluster import admin

    with admin_errors():
        info = admin.metadata(brokers(bootstrap, command_config))
    print_table(
        None,
        ["TOPIC", "PARTITIONS", "REPLICATION", "ID"],
        [[t.name, len(t.partitions), t.replication_factor, t.topic_id] for t in info.topics],
    )


@topics_app.command("describe")
def topics_describe(
    topics: Annotated[list[str] | None, typer.Argument(help="Topics (default: all).")] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Leader, epoch, replicas and ISR of every partition."""
    from cluster import admin

    with admin_errors():
        info = admin.metadata(brokers(bootstrap, command_config), topics or None)
    for t in info.topics:
        print_table(
            f"{t.name}  id {t.topic_id}  partitions {len(t.partitions)}  "
            f"replication {t.replication_factor}" + ("  (internal)" if t.internal else ""),
            ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            [
                [
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    _ids(p.replicas),
                    _ids(p.isr),
                    _ids(p.offline),
                ]
                for p in t.partitions
            ],
        )


@topics_app.command("create")
def topics_create(
    name: str,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", help="-1: the broker's num.partitions.")
    ] = -1,
    replication_factor: Annotated[
        int,
        typer.Option(
            "--replication-factor", "-r", help="-1: the broker's default.replication.factor."
        ),
    ] = -1,
    config: Annotated[
        list[str] | None, typer.Option("--config", help="Topic setting key=value; repeatable.")
    ] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Create a topic."""
    from cluster import admin

    with admin_errors():
        admin.create_topic(
            brokers(bootstrap, command_config),
            name,
            partitions,
            replication_factor,
            parse_overrides(config),
        )
    typer.echo(f"Created topic {name}.")


@topics_app.command("delete")
def topics_delete(
    names: list[str],
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Delete topics."""
    from cluster import admin

    with admin_errors():
        results = admin.delete_topics(brokers(bootstrap, command_config), names)
    report(results, "Deleted topic")


@topics_app.command("alter")
def topics_alter(
    name: str,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", help="The new partition count (only up).")
    ],
    replica_assignment: Annotated[
        str | None,
        typer.Option(
            "--replica-assignment",
            help="Replicas of every partition as kafka-topics.sh takes them: broker ids joined "
            "by ':', partitions by ',' (1:2,2:3,3:1); those of the existing partitions are "
            "skipped. Default: the cluster places the new partitions.",
        ),
    ] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Add partitions to a topic (records keep their partitions: keyed records of the same
    key may now go to another one)."""
    from cluster import admin

    with admin_errors():
        target = brokers(bootstrap, command_config)
        assignments = None
        if replica_assignment is not None:
            (info,) = admin.metadata(target, [name]).topics
            assignments = parse_replica_assignment(replica_assignment)[len(info.partitions) :]
        admin.create_partitions(target, name, partitions, assignments)
    typer.echo(f"Topic {name} now has {partitions} partitions.")


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's --replica-assignment: "1:2,2:3" -> [[1, 2], [2, 3]]."""
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: broker ids joined by ':', partitions by ',' (e.g. 1:2,2:3)"
        ) from None


def report(results: Mapping[str, Exception | None], done: str) -> None:
    """One line per item; exit status 1 if any failed."""
    for name, error in results.items():
        typer.echo(f"{done} {name}." if error is None else f"rafka: {error}", err=error is not None)
    if any(results.values()):
        raise typer.Exit(1)


@groups_app.command("list")
def groups_list(
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    meta: MetaOpt = DEFAULT_META,
) -> None:
    """Every consumer group of the cluster (the meta service's registry), with its coordinator."""
    from cluster import admin

    with admin_errors():
        groups = admin.list_groups(
            brokers(bootstrap, command_config), meta_service(meta, command_config)
        )
    print_table(
        None,
        ["GROUP", "TYPE", "STATE", "COORDINATOR", "PARTITION"],
        [
            [
                g.group,
                g.type or "?",
                g.state or "unknown (coordinator not answering)",
                g.coordinator if g.coordinator >= 0 else "none",
                f"__consumer_offsets-{g.coordinator_partition}",
            ]
            for g in groups
        ],
    )


@groups_app.command("describe")
def groups_describe(
    group: str, bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP, command_config: CommandConfigOpt = None
) -> None:
    """Members, assignments, committed offsets and lag of a group."""
    from cluster import admin

    with admin_errors():
        d = admin.describe_group(brokers(bootstrap, command_config), group)
    typer.echo(
        f"group {d.group} ({d.type}): {d.state}, assignor {d.protocol or '-'}, "
        f"coordinator {d.coordinator}, {len(d.members)} member(s)"
    )
    members = {m.member_id: m for m in d.members}
    print_table(
        None,
        [
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
        [
            [
                o.topic,
                o.partition,
                o.committed if o.committed >= 0 else "-",
                o.end if o.end >= 0 else "-",
                "-" if o.lag is None else o.lag,
                o.owner or "-",
            ]
            + (
                [members[o.owner].host, members[o.owner].client_id]
                if o.owner in members
                else ["-", "-"]
            )
            for o in d.offsets
        ],
    )


@groups_app.command("delete")
def groups_delete(
    groups: list[str],
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Delete groups with no members (their committed offsets go too)."""
    from cluster import admin

    with admin_errors():
        results = admin.delete_groups(brokers(bootstrap, command_config), groups)
    report(results, "Deleted group")


# ---------------------------------------------------------------- transactions

transactions_app = typer.Typer(
    no_args_is_help=True, help="List and describe transactions (as kafka-transactions.sh does)."
)
app.add_typer(transactions_app, name="transactions")


@transactions_app.command("list")
def transactions_list(
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            help="Only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, "
            "CompleteCommit, CompleteAbort, PrepareEpochFence, Dead); repeatable.",
        ),
    ] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="Only this producer id; repeatable.")
    ] = None,
    duration_ms: Annotated[
        int,
        typer.Option("--duration-ms", help="Only transactions open longer than this (ms)."),
    ] = -1,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Every transactional id the coordinators know (each broker asked, as Kafka's admin does),
    with its coordinator, producer id and state."""
    from cluster import admin

    with admin_errors():
        listed = admin.list_transactions(
            brokers(bootstrap, command_config), state or (), producer_id or (), duration_ms
        )
    print_table(
        None,
        ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"],
        [[t.transactional_id, t.coordinator, t.producer_id, t.state] for t in listed.transactions],
    )
    if listed.unknown_states:
        typer.echo(f"rafka: unknown state(s): {', '.join(listed.unknown_states)}", err=True)
    report({f"broker {node}": e for node, e in listed.failed.items()}, "")


@transactions_app.command("describe")
def transactions_describe(
    transactional_ids: Annotated[list[str], typer.Argument(help="Transactional ids.")],
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """State, producer id and epoch, timeout, start time, age and partitions of each
    transactional id, from its coordinator."""
    from cluster import admin

    with admin_errors():
        results = admin.describe_transactions(brokers(bootstrap, command_config), transactional_ids)
    now_ms = int(time.time() * 1000)
    described = [d for d in results.values() if isinstance(d, admin.TransactionDescription)]
    print_table(
        None,
        [
            "TRANSACTIONAL-ID",
            "COORDINATOR",
            "PRODUCER-ID",
            "EPOCH",
            "STATE",
            "TIMEOUT-MS",
            "START-TIME",
            "AGE",
            "PARTITIONS",
        ],
        [transaction_row(d, now_ms) for d in described],
    )
    report({tid: e for tid, e in results.items() if isinstance(e, Exception)}, "")


def transaction_row(d: TransactionDescription, now_ms: int) -> list[object]:
    """One `transactions describe` row: start time in UTC, age only while the transaction is
    open, partitions as topic-partition (those still awaiting a marker in a Prepare* state)."""
    age = d.age_ms(now_ms)
    return [
        d.transactional_id,
        d.coordinator,
        d.producer_id,
        d.producer_epoch,
        d.state,
        d.timeout_ms,
        format_time_ms(d.start_time_ms),
        "-" if age is None else format_age(age),
        ",".join(f"{t}-{p}" for t, p in d.partitions) or "-",
    ]


def format_time_ms(ms: int) -> str:
    """A Kafka timestamp (ms) as ISO 8601 UTC; "-" for none (-1)."""
    if ms < 0:
        return "-"
    when = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def format_age(ms: int) -> str:
    """A duration short enough for a table cell: 850ms, 12.3s, 5m07s, 2h03m, 3d04h."""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


# ---------------------------------------------------------------- ACLs and SCRAM users

acls_app = typer.Typer(
    no_args_is_help=True, help="List, add and remove ACLs (as kafka-acls.sh does)."
)
users_app = typer.Typer(
    no_args_is_help=True, help="List, create and delete SCRAM users (as kafka-configs.sh does)."
)
app.add_typer(acls_app, name="acls")
app.add_typer(users_app, name="users")


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


# ---------------------------------------------------------------- reassignments and elections

partitions_app = typer.Typer(
    no_args_is_help=True,
    help="Move partitions between brokers and elect leaders (as kafka-reassign-partitions.sh "
    "and kafka-leader-election.sh do).",
)
app.add_typer(partitions_app, name="partitions")

OneTopicOpt = Annotated[str | None, typer.Option("--topic", help="Topic name.")]


def _broker_ids(text: str) -> list[int]:
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of broker ids") from None


@partitions_app.command("reassign")
def partitions_reassign(
    topic: Annotated[str, typer.Option("--topic", help="Topic name.")],
    partition: Annotated[int, typer.Option("--partition", help="Partition index.")],
    replicas: Annotated[
        str | None,
        typer.Option("--replicas", help="Target broker ids, comma-separated, preferred first."),
    ] = None,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel the partition's reassignment instead.")
    ] = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Start moving a partition to other brokers (or cancel its move); `list-reassignments`
    shows the progress."""
    from cluster import admin

    if (replicas is None) == (not cancel):
        raise typer.BadParameter("give either --replicas or --cancel")
    target = None if cancel or replicas is None else _broker_ids(replicas)
    with admin_errors():
        results = admin.reassign_partitions(
            brokers(bootstrap, command_config), [(topic, partition, target)]
        )
    if target is None:
        report(results, "Cancelled the reassignment of")
    else:
        report(results, f"Started the reassignment to replicas {_ids(target)} of")


@partitions_app.command("list-reassignments")
def partitions_list_reassignments(
    topic: OneTopicOpt = None,
    partition: Annotated[
        list[int] | None, typer.Option("--partition", help="With --topic; repeatable.")
    ] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """The reassignments in progress: current replicas, replicas being added and removed."""
    from cluster import admin

    with admin_errors():
        target = brokers(bootstrap, command_config)
        wanted = _partitions(target, topic, partition)
        ongoing = admin.list_reassignments(target, wanted)
    if not ongoing:
        typer.echo("No partition reassignments in progress.")
        return
    print_table(
        None,
        ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
        [
            [r.topic, r.partition, _ids(r.replicas), _ids(r.adding), _ids(r.removing)]
            for r in ongoing
        ],
    )


class ElectionType(StrEnum):
    preferred = "preferred"
    unclean = "unclean"


@partitions_app.command("elect")
def partitions_elect(
    election: Annotated[
        ElectionType,
        typer.Option(
            "--type",
            help="preferred: the first replica leads again; unclean: an offline partition gets "
            "any live replica as leader (records may be lost).",
        ),
    ] = ElectionType.preferred,
    topic: OneTopicOpt = None,
    partition: Annotated[
        list[int] | None,
        typer.Option("--partition", help="With --topic; repeatable (default: all of it)."),
    ] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Elect leaders (every partition unless --topic is given); exit status 1 if an election
    failed."""
    from cluster import admin

    with admin_errors():
        target = brokers(bootstrap, command_config)
        results = admin.elect_leaders(target, election.value, _partitions(target, topic, partition))
    not_needed = [
        k for k, e in results.items() if e and e.code == admin.ErrorCode.election_not_needed
    ]
    elected = [k for k, e in results.items() if e is None]
    failed = {k: e for k, e in results.items() if e is not None and k not in not_needed}
    if elected:
        typer.echo(f"Elected {election.value} leaders of: {', '.join(elected)}.")
    if not_needed:
        typer.echo(f"Valid replica already elected for: {', '.join(not_needed)}.")
    if not results:
        typer.echo("No partition needed an election.")
    for error in failed.values():
        typer.echo(f"rafka: {error}", err=True)
    if failed:
        raise typer.Exit(1)


def _partitions(
    target: Brokers, topic: str | None, partitions: list[int] | None
) -> list[tuple[str, int]] | None:
    """The partitions named by --topic/--partition (None: all of the cluster's)."""
    from cluster import admin

    if topic is None:
        if partitions:
            raise typer.BadParameter("--partition needs --topic")
        return None
    if partitions:
        return [(topic, p) for p in partitions]
    (info,) = admin.metadata(target, [topic]).topics
    return [(topic, p.partition) for p in info.partitions]


# ---------------------------------------------------------------- records

records_app = typer.Typer(
    no_args_is_help=True, help="Delete records (as kafka-delete-records.sh does)."
)
app.add_typer(records_app, name="records")


@records_app.command("delete")
def records_delete(
    topic: Annotated[str | None, typer.Option("--topic", help="Topic name.")] = None,
    partition: Annotated[
        list[int] | None, typer.Option("--partition", help="With --topic; repeatable.")
    ] = None,
    offset: Annotated[
        int | None,
        typer.Option(
            "--offset", help="With --topic: delete the records before it (-1: the high watermark)."
        ),
    ] = None,
    offset_json_file: Annotated[
        Path | None,
        typer.Option(
            "--offset-json-file",
            help='kafka-delete-records.sh\'s JSON: {"partitions": [{"topic": "t", '
            '"partition": 0, "offset": 10}], "version": 1}.',
        ),
    ] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Delete the records before an offset, on every replica; consumers then start at it.
    The disk space is freed at the brokers' next retention check. Exit status 1 if a
    partition failed."""
    from cluster import admin

    offsets = _deletions(topic, partition, offset, offset_json_file)
    with admin_errors():
        results = admin.delete_records(brokers(bootstrap, command_config), offsets)
    failed = False
    for (t, p), result in sorted(results.items()):
        if isinstance(result, Exception):
            failed = True
            typer.echo(f"rafka: {result}", err=True)
        else:
            typer.echo(f"{t}-{p}: low watermark {result} (the records before it are deleted).")
    if failed:
        raise typer.Exit(1)


def _deletions(
    topic: str | None, partitions: list[int] | None, offset: int | None, json_file: Path | None
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset from --topic/--partition/--offset or --offset-json-file."""
    import json

    if (json_file is None) == (topic is None):
        raise typer.BadParameter("give either --topic with --offset, or --offset-json-file")
    if json_file is None:
        if offset is None or not partitions:
            raise typer.BadParameter("--topic needs --partition and --offset")
        return {(str(topic), p): offset for p in partitions}
    try:
        spec = json.loads(json_file.read_text())
        return {(e["topic"], int(e["partition"])): int(e["offset"]) for e in spec["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise typer.BadParameter(f"{json_file}: not kafka-delete-records.sh's JSON ({e})") from None


# ---------------------------------------------------------------- log dirs

logdirs_app = typer.Typer(
    no_args_is_help=True, help="The brokers' log directories (as kafka-log-dirs.sh does)."
)
app.add_typer(logdirs_app, name="logdirs")


@logdirs_app.command("describe")
def logdirs_describe(
    broker: Annotated[
        list[int] | None, typer.Option("--broker", help="Only this broker id; repeatable.")
    ] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Each broker's log directories (an offline one shows KAFKA_STORAGE_ERROR), their volume's
    total and usable bytes, and the replicas in each with size and offset lag (FUTURE: the copy
    AlterReplicaLogDirs is making)."""
    from cluster import admin

    with admin_errors():
        described = admin.describe_log_dirs(brokers(bootstrap, command_config), broker)
    rows: list[list[object]] = []
    for node, dirs in sorted(described.items()):
        if isinstance(dirs, Exception):
            continue
        for d in dirs:
            rows.append([node, d.path, d.error or "ONLINE", d.total_bytes, d.usable_bytes, "", ""])
            rows += [
                [
                    "",
                    "",
                    f"{r.topic}-{r.partition}" + (" (FUTURE)" if r.is_future else ""),
                    "",
                    "",
                    r.size,
                    r.offset_lag,
                ]
                for r in sorted(d.replicas, key=lambda r: (r.topic, r.partition, r.is_future))
            ]
    print_table(
        None,
        ["BROKER", "LOG-DIR", "STATE/REPLICA", "TOTAL-BYTES", "USABLE-BYTES", "SIZE", "LAG"],
        rows,
    )
    report({f"broker {n}": e for n, e in described.items() if isinstance(e, Exception)}, "")


# ---------------------------------------------------------------- features

features_app = typer.Typer(
    help="The cluster's feature levels (as kafka-features.sh does); alone: describe."
)
app.add_typer(features_app, name="features")

FeatureOpt = Annotated[
    str, typer.Option("--feature", help="The feature, e.g. transaction.version.")
]
VersionOpt = Annotated[int, typer.Option("--version", help="The level to finalize.")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Only validate (UpdateFeatures validate_only).")
]


@features_app.callback(invoke_without_command=True)
def features_main(
    ctx: typer.Context,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """`rafka features` alone describes them."""
    if ctx.invoked_subcommand is None:
        features_describe(bootstrap, command_config)


@features_app.command("describe")
def features_describe(
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Each feature's supported levels and finalized level, and their epoch."""
    from cluster import admin

    with admin_errors():
        features, epoch = admin.describe_features(brokers(bootstrap, command_config))
    for f in features:
        typer.echo(
            f"Feature: {f.name}\tSupportedMinVersion: {f.supported_min}\t"
            f"SupportedMaxVersion: {f.supported_max}\tFinalizedVersionLevel: {f.finalized}\t"
            f"Epoch: {epoch}"
        )


def _update_feature(
    feature: str, version: int, kind: str, dry_run: bool, bootstrap: str, config: Path | None
) -> None:
    from cluster import admin

    with admin_errors():
        admin.update_features(brokers(bootstrap, config), {feature: version}, kind, dry_run)
    done = "could be" if dry_run else "was"
    typer.echo(f"{feature} {done} {kind.replace('-', ' ')}d to {version}.")


@features_app.command("upgrade")
def features_upgrade(
    feature: FeatureOpt,
    version: VersionOpt,
    dry_run: DryRunOpt = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Raise a feature's finalized level."""
    _update_feature(feature, version, "upgrade", dry_run, bootstrap, command_config)


@features_app.command("downgrade")
def features_downgrade(
    feature: FeatureOpt,
    version: VersionOpt,
    unsafe: Annotated[
        bool, typer.Option("--unsafe", help="Allow a downgrade that may lose metadata.")
    ] = False,
    dry_run: DryRunOpt = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Lower a feature's finalized level (0 disables it)."""
    kind = "unsafe-downgrade" if unsafe else "safe-downgrade"
    _update_feature(feature, version, kind, dry_run, bootstrap, command_config)


configs_app = typer.Typer(
    no_args_is_help=True,
    help="Describe and alter topic, broker and broker-logger configs (as kafka-configs.sh).",
)
app.add_typer(configs_app, name="configs")

ConfigTopicOpt = Annotated[str | None, typer.Option("--topic", help="A topic's configs.")]
ConfigBrokerOpt = Annotated[
    int | None, typer.Option("--broker", help="A broker's configs (by its node.id).")
]
BrokerDefaultsOpt = Annotated[
    bool, typer.Option("--broker-defaults", help="The cluster-wide dynamic broker configs.")
]
BrokerLoggerOpt = Annotated[
    int | None, typer.Option("--broker-logger", help="A broker's logger levels (by node.id).")
]


def config_resource(
    topic: str | None, broker: int | None, broker_defaults: bool, broker_logger: int | None
) -> tuple[str, str]:
    """(resource type, name) of the one resource named on the command line."""
    given = [
        ("topic", topic) if topic is not None else None,
        ("broker", str(broker)) if broker is not None else None,
        ("broker", "") if broker_defaults else None,
        ("broker-logger", str(broker_logger)) if broker_logger is not None else None,
    ]
    chosen = [g for g in given if g is not None]
    if len(chosen) != 1:
        raise typer.BadParameter(
            "name exactly one of --topic, --broker, --broker-defaults, --broker-logger"
        )
    return chosen[0]


def parse_config_list(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k1=v1,k2=[v1,v2],... (brackets keep a list's commas)."""
    out: dict[str, str] = {}
    depth, current = 0, ""
    for ch in text + ",":
        if ch == "," and depth == 0:
            if current.strip():
                name, sep, value = current.partition("=")
                if not sep or not name.strip():
                    raise typer.BadParameter(f"{current.strip()!r}: expected name=value")
                out[name.strip()] = value.strip().removeprefix("[").removesuffix("]")
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        current += ch
    return out


@configs_app.command("describe")
def configs_describe(
    topic: ConfigTopicOpt = None,
    broker: ConfigBrokerOpt = None,
    broker_defaults: BrokerDefaultsOpt = False,
    broker_logger: BrokerLoggerOpt = None,
    all_configs: Annotated[
        bool, typer.Option("--all", help="Every setting, not only the dynamic ones.")
    ] = False,
    synonyms: Annotated[
        bool, typer.Option("--synonyms", help="Where each value comes from.")
    ] = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """A resource's configs: those set dynamically (--all: every setting with its source)."""
    from cluster import admin

    resource, name = config_resource(topic, broker, broker_defaults, broker_logger)
    with admin_errors():
        found = admin.describe_configs(brokers(bootstrap, command_config), resource, name)
    if not all_configs and resource != "broker-logger":
        found = [c for c in found if c.source.startswith("DYNAMIC_")]
    columns = ["NAME", "VALUE", "SOURCE", "READ-ONLY"] + (["SYNONYMS"] if synonyms else [])
    rows: list[list[object]] = []
    for c in found:
        value = "(sensitive)" if c.sensitive else c.value
        row: list[object] = [c.name, value, c.source, "yes" if c.read_only else "no"]
        if synonyms:
            row.append(
                ", ".join(
                    f"{s}:{n}={'(sensitive)' if c.sensitive else v}" for n, v, s in c.synonyms
                )
            )
        rows.append(row)
    what = {"topic": f"topic {name}", "broker-logger": f"the loggers of broker {name}"}.get(
        resource, f"broker {name}" if name else "the cluster-wide broker defaults"
    )
    print_table(f"Configs of {what}:", columns, rows)


@configs_app.command("alter")
def configs_alter(
    topic: ConfigTopicOpt = None,
    broker: ConfigBrokerOpt = None,
    broker_defaults: BrokerDefaultsOpt = False,
    broker_logger: BrokerLoggerOpt = None,
    add_config: Annotated[
        str | None, typer.Option("--add-config", help="k1=v1,k2=[v1,v2],... to set.")
    ] = None,
    delete_config: Annotated[
        str | None, typer.Option("--delete-config", help="k1,k2,... to remove.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only validate.")] = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Set and remove dynamic configs (IncrementalAlterConfigs); they apply on every broker
    without a restart and are kept in the meta service (logger levels: on that broker, until
    it restarts)."""
    from cluster import admin

    resource, name = config_resource(topic, broker, broker_defaults, broker_logger)
    add = parse_config_list(add_config or "")
    delete = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
    if not add and not delete:
        raise typer.BadParameter("give --add-config and/or --delete-config")
    with admin_errors():
        admin.alter_configs(
            brokers(bootstrap, command_config), resource, name, add, delete, dry_run
        )
    done = "Validated" if dry_run else "Completed"
    typer.echo(f"{done} updating the configs of {resource} {name!r}.")


if __name__ == "__main__":
    app()
