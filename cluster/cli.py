"""The `rafka` command: start a local cluster, or run one meta node or one broker.

    rafka up [--brokers 3] [--meta 3] [--data-dir ./data] [--base-port 9092]
    rafka meta   [--config meta.properties]   [-o key=value ...]
    rafka broker [--config server.properties] [-o key=value ...]

Settings use Kafka's names; see README.md for the list and for RAFKA_* environment variables.
"""

from __future__ import annotations

import logging
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


if __name__ == "__main__":
    app()
