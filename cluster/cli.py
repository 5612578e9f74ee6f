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
    rafka meta-quorum describe [--replication] | add-controller --config NEW-META.properties
                    | remove-controller --controller-id N --controller-directory-id ID
    rafka verify [--nemesis kill-leader,isolate-node,...] [--time S] [--rounds N] [--seed N]
                 [--each]                          # Jepsen-style run against a fresh cluster

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
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cluster import cli_meta_quorum, cli_operations, cli_quotas, cli_security, cli_verify
from cluster.cli_common import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_META,
    BootstrapOpt,
    CommandConfigOpt,
    MetaOpt,
    admin_errors,
    brokers,
    ids,
    meta_service,
    print_table,
    report,
)
from cluster.open_files import raise_open_files_limit

if TYPE_CHECKING:
    from cluster.admin_transactions import TransactionDescription

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
    from meta.node import MetaFailedError, MetaStartupError, run_meta_node

    setup_logging(log_level)
    raise_open_files_limit("meta node")
    try:
        run_meta_node(MetaConfig.load(config, parse_overrides(override)))
    except (MetaStartupError, MetaFailedError):
        raise typer.Exit(1) from None  # already logged with what to do


@app.command()
def broker(
    config: ConfigOpt = None, override: OverrideOpt = None, log_level: LogLevelOpt = "INFO"
) -> None:
    """Run one broker."""
    from dataplane.broker import run_broker
    from dataplane.config import BrokerConfig

    setup_logging(log_level)
    raise_open_files_limit("broker")
    run_broker(BrokerConfig.load(config, parse_overrides(override)))


# ---------------------------------------------------------------- admin commands

topics_app = typer.Typer(no_args_is_help=True, help="List, describe, create and delete topics.")
groups_app = typer.Typer(
    no_args_is_help=True, help="List, describe and delete consumer and share groups."
)
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")


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
                    ids(p.replicas),
                    ids(p.isr),
                    ids(p.offline),
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
    from cluster import admin, admin_operations

    with admin_errors():
        target = brokers(bootstrap, command_config)
        assignments = None
        if replica_assignment is not None:
            (info,) = admin.metadata(target, [name]).topics
            assignments = parse_replica_assignment(replica_assignment)[len(info.partitions) :]
        admin_operations.create_partitions(target, name, partitions, assignments)
    typer.echo(f"Topic {name} now has {partitions} partitions.")


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's --replica-assignment: "1:2,2:3" -> [[1, 2], [2, 3]]."""
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: broker ids joined by ':', partitions by ',' (e.g. 1:2,2:3)"
        ) from None


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
    """Members, assignments, committed offsets and lag of a group (of a share group: start
    offsets and lag of its share-partitions)."""
    from cluster import admin
    from cluster.admin_share_groups import describe_share_group
    from cluster.cli_share_groups import print_share_group

    with admin_errors():
        share = describe_share_group(brokers(bootstrap, command_config), group)
        if share is not None:
            print_share_group(share)
            return
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

    from cluster import admin_transactions

    with admin_errors():
        listed = admin_transactions.list_transactions(
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

    from cluster import admin_transactions

    with admin_errors():
        results = admin_transactions.describe_transactions(
            brokers(bootstrap, command_config), transactional_ids
        )
    now_ms = int(time.time() * 1000)
    described = [
        d for d in results.values() if isinstance(d, admin_transactions.TransactionDescription)
    ]
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


for _name, _app in (
    ("acls", cli_security.acls_app),
    ("users", cli_security.users_app),
    ("partitions", cli_operations.partitions_app),
    ("records", cli_operations.records_app),
    ("logdirs", cli_operations.logdirs_app),
    ("features", cli_operations.features_app),
    ("configs", cli_operations.configs_app),
    ("quotas", cli_quotas.quotas_app),
    ("meta-quorum", cli_meta_quorum.meta_quorum_app),
):
    app.add_typer(_app, name=_name)
app.command("verify")(cli_verify.verify)

if __name__ == "__main__":
    app()
