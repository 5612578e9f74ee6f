"""What the `rafka` admin commands share: the options naming the cluster and the client's
security settings, one way to report what the cluster refused, the tables they print."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from cluster.admin import Brokers, Meta

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
    from common.internal_security import InternalSecurityError
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
    from common.internal_security import InternalSecurity

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


def ids(nodes: list[int]) -> str:
    """Broker ids as the tools print them: 1,2,3."""
    return ",".join(map(str, nodes))


def report(results: Mapping[str, Exception | None], done: str) -> None:
    """One line per item; exit status 1 if any failed."""
    for name, error in results.items():
        typer.echo(f"{done} {name}." if error is None else f"rafka: {error}", err=error is not None)
    if any(results.values()):
        raise typer.Exit(1)
