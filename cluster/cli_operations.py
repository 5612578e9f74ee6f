"""`rafka partitions`, `records`, `logdirs`, `features` and `configs`: moving partitions and
electing leaders, deleting records, log directories, feature levels and dynamic configs (as
kafka-reassign-partitions.sh, kafka-leader-election.sh, kafka-delete-records.sh,
kafka-log-dirs.sh, kafka-features.sh and kafka-configs.sh do), each over the Kafka API."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from cluster.admin import Brokers

from cluster.cli_common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOpt,
    CommandConfigOpt,
    admin_errors,
    brokers,
    ids,
    print_table,
    report,
)

# ---------------------------------------------------------------- reassignments and elections

partitions_app = typer.Typer(
    no_args_is_help=True,
    help="Move partitions between brokers and elect leaders (as kafka-reassign-partitions.sh "
    "and kafka-leader-election.sh do).",
)

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
    from cluster import admin_operations as ops

    if (replicas is None) == (not cancel):
        raise typer.BadParameter("give either --replicas or --cancel")
    target = None if cancel or replicas is None else _broker_ids(replicas)
    with admin_errors():
        results = ops.reassign_partitions(
            brokers(bootstrap, command_config), [(topic, partition, target)]
        )
    if target is None:
        report(results, "Cancelled the reassignment of")
    else:
        report(results, f"Started the reassignment to replicas {ids(target)} of")


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
    from cluster import admin_operations as ops

    with admin_errors():
        target = brokers(bootstrap, command_config)
        wanted = _partitions(target, topic, partition)
        ongoing = ops.list_reassignments(target, wanted)
    if not ongoing:
        typer.echo("No partition reassignments in progress.")
        return
    print_table(
        None,
        ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
        [[r.topic, r.partition, ids(r.replicas), ids(r.adding), ids(r.removing)] for r in ongoing],
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
    from kio.schema.errors import ErrorCode

    from cluster import admin_operations as ops

    with admin_errors():
        target = brokers(bootstrap, command_config)
        results = ops.elect_leaders(target, election.value, _partitions(target, topic, partition))
    not_needed = [k for k, e in results.items() if e and e.code == ErrorCode.election_not_needed]
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
    from cluster import admin_operations as ops

    if topic is None:
        if partitions:
            raise typer.BadParameter("--partition needs --topic")
        return None
    if partitions:
        return [(topic, p) for p in partitions]
    (info,) = ops.metadata(target, [topic]).topics
    return [(topic, p.partition) for p in info.partitions]


# ---------------------------------------------------------------- records

records_app = typer.Typer(
    no_args_is_help=True, help="Delete records (as kafka-delete-records.sh does)."
)


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
    from cluster import admin_operations as ops

    offsets = _deletions(topic, partition, offset, offset_json_file)
    with admin_errors():
        results = ops.delete_records(brokers(bootstrap, command_config), offsets)
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
    from cluster import admin_operations as ops

    with admin_errors():
        described = ops.describe_log_dirs(brokers(bootstrap, command_config), broker)
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
    from cluster import admin_operations as ops

    with admin_errors():
        features, epoch = ops.describe_features(brokers(bootstrap, command_config))
    for f in features:
        typer.echo(
            f"Feature: {f.name}\tSupportedMinVersion: {f.supported_min}\t"
            f"SupportedMaxVersion: {f.supported_max}\tFinalizedVersionLevel: {f.finalized}\t"
            f"Epoch: {epoch}"
        )


def _update_feature(
    feature: str, version: int, kind: str, dry_run: bool, bootstrap: str, config: Path | None
) -> None:
    from cluster import admin_operations as ops

    with admin_errors():
        ops.update_features(brokers(bootstrap, config), {feature: version}, kind, dry_run)
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
    help="Describe and alter topic, broker, broker-logger, group and client-metrics configs "
    "(as kafka-configs.sh).",
)

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
GroupOpt = Annotated[
    str | None,
    typer.Option("--group", help="A group's configs (share.auto.offset.reset, ...)."),
]
ClientMetricsOpt = Annotated[
    str | None,
    typer.Option("--client-metrics", help="A client metrics subscription (KIP-714) by name."),
]


def config_resource(
    topic: str | None,
    broker: int | None,
    broker_defaults: bool,
    broker_logger: int | None,
    group: str | None = None,
    client_metrics: str | None = None,
) -> tuple[str, str]:
    """(resource type, name) of the one resource named on the command line."""
    given = [
        ("topic", topic) if topic is not None else None,
        ("broker", str(broker)) if broker is not None else None,
        ("broker", "") if broker_defaults else None,
        ("broker-logger", str(broker_logger)) if broker_logger is not None else None,
        ("group", group) if group is not None else None,
        ("client-metrics", client_metrics) if client_metrics is not None else None,
    ]
    chosen = [g for g in given if g is not None]
    if len(chosen) != 1:
        raise typer.BadParameter(
            "name exactly one of --topic, --broker, --broker-defaults, --broker-logger, "
            "--group, --client-metrics"
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


# the sources of values set on a group or a subscription (not named DYNAMIC_ in Kafka)
_SET_ON = frozenset({"GROUP_CONFIG", "CLIENT_METRICS_CONFIG"})


@configs_app.command("describe")
def configs_describe(
    topic: ConfigTopicOpt = None,
    broker: ConfigBrokerOpt = None,
    broker_defaults: BrokerDefaultsOpt = False,
    broker_logger: BrokerLoggerOpt = None,
    group: GroupOpt = None,
    client_metrics: ClientMetricsOpt = None,
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
    from cluster import admin_operations as ops

    resource, name = config_resource(
        topic, broker, broker_defaults, broker_logger, group, client_metrics
    )
    with admin_errors():
        found = ops.describe_configs(brokers(bootstrap, command_config), resource, name)
    if not all_configs and resource != "broker-logger":
        found = [c for c in found if c.source.startswith("DYNAMIC_") or c.source in _SET_ON]
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
    what = {
        "topic": f"topic {name}",
        "broker-logger": f"the loggers of broker {name}",
        "group": f"group {name}",
        "client-metrics": f"client metrics subscription {name}",
    }.get(resource, f"broker {name}" if name else "the cluster-wide broker defaults")
    print_table(f"Configs of {what}:", columns, rows)


@configs_app.command("alter")
def configs_alter(
    topic: ConfigTopicOpt = None,
    broker: ConfigBrokerOpt = None,
    broker_defaults: BrokerDefaultsOpt = False,
    broker_logger: BrokerLoggerOpt = None,
    group: GroupOpt = None,
    client_metrics: ClientMetricsOpt = None,
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
    from cluster import admin_operations as ops

    resource, name = config_resource(
        topic, broker, broker_defaults, broker_logger, group, client_metrics
    )
    add = parse_config_list(add_config or "")
    delete = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
    if not add and not delete:
        raise typer.BadParameter("give --add-config and/or --delete-config")
    with admin_errors():
        ops.alter_configs(brokers(bootstrap, command_config), resource, name, add, delete, dry_run)
    done = "Validated" if dry_run else "Completed"
    typer.echo(f"{done} updating the configs of {resource} {name!r}.")
