"""The `rafka` command: start a local cluster, run one meta node or one broker, administer.

    rafka up [--brokers 3] [--meta 3] [--data-dir ./data] [--base-port 9092]
    rafka meta   [--config meta.properties]   [-o key=value ...]
    rafka broker [--config server.properties] [-o key=value ...]
    rafka cluster                                   # meta quorum, brokers, partition health
    rafka topics list | describe [TOPIC...] | create NAME [-p N] [-r N] [--config k=v] | delete
    rafka groups list | describe GROUP | delete GROUP...

Settings use Kafka's names; see README.md for the list and for RAFKA_* environment variables.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

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
) -> None:
    """Start a local cluster as separate processes; Ctrl-C or SIGTERM stops it cleanly."""
    from cluster.local import LocalCluster

    if meta not in (1, 3):
        raise typer.BadParameter("--meta must be 1 or 3")
    setup_logging(log_level)
    try:
        LocalCluster(brokers, meta, data_dir, base_port, parse_overrides(override), log_level).run()
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
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_META = "127.0.0.1:9192"


@contextmanager
def admin_errors() -> Iterator[None]:
    """What the cluster refused or could not answer, said in one line; exit status 1."""
    from cluster.admin import AdminError
    from meta.client import MetaError

    try:
        yield
    except (AdminError, MetaError, ConnectionError, TimeoutError, OSError) as e:
        typer.echo(f"rafka: {e}", err=True)
        raise typer.Exit(1) from None


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
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP, meta: MetaOpt = DEFAULT_META
) -> None:
    """The meta quorum, the brokers and the health of the partitions."""
    from cluster import admin

    with admin_errors():
        q = admin.quorum(meta)
        info = admin.metadata(bootstrap)
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
def topics_list(bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Topic names, partitions and replication factor."""
    from cluster import admin

    with admin_errors():
        info = admin.metadata(bootstrap)
    print_table(
        None,
        ["TOPIC", "PARTITIONS", "REPLICATION", "ID"],
        [[t.name, len(t.partitions), t.replication_factor, t.topic_id] for t in info.topics],
    )


@topics_app.command("describe")
def topics_describe(
    topics: Annotated[list[str] | None, typer.Argument(help="Topics (default: all).")] = None,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
) -> None:
    """Leader, epoch, replicas and ISR of every partition."""
    from cluster import admin

    with admin_errors():
        info = admin.metadata(bootstrap, topics or None)
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
) -> None:
    """Create a topic."""
    from cluster import admin

    with admin_errors():
        admin.create_topic(bootstrap, name, partitions, replication_factor, parse_overrides(config))
    typer.echo(f"Created topic {name}.")


@topics_app.command("delete")
def topics_delete(names: list[str], bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Delete topics."""
    from cluster import admin

    with admin_errors():
        results = admin.delete_topics(bootstrap, names)
    report(results, "Deleted topic")


def report(results: Mapping[str, Exception | None], done: str) -> None:
    """One line per item; exit status 1 if any failed."""
    for name, error in results.items():
        typer.echo(f"{done} {name}." if error is None else f"rafka: {error}", err=error is not None)
    if any(results.values()):
        raise typer.Exit(1)


@groups_app.command("list")
def groups_list(bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP, meta: MetaOpt = DEFAULT_META) -> None:
    """Every consumer group of the cluster (the meta service's registry), with its coordinator."""
    from cluster import admin

    with admin_errors():
        groups = admin.list_groups(bootstrap, meta)
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
def groups_describe(group: str, bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Members, assignments, committed offsets and lag of a group."""
    from cluster import admin

    with admin_errors():
        d = admin.describe_group(bootstrap, group)
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
def groups_delete(groups: list[str], bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Delete groups with no members (their committed offsets go too)."""
    from cluster import admin

    with admin_errors():
        results = admin.delete_groups(bootstrap, groups)
    report(results, "Deleted group")


if __name__ == "__main__":
    app()
