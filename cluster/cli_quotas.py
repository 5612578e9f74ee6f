"""`rafka quotas`: client quotas (as kafka-configs.sh --entity-type users / clients / ips), over
the Kafka API (DescribeClientQuotas, AlterClientQuotas).

An entity is named by ``--user``, ``--client-id`` (alone or together) or ``--ip``; the value
``<default>`` (or an empty value) names the type's default entity, as kafka-configs.sh's
``--entity-default`` does."""

from __future__ import annotations

from typing import Annotated

import typer

from cluster.cli_common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOpt,
    CommandConfigOpt,
    admin_errors,
    brokers,
    print_table,
)

quotas_app = typer.Typer(
    no_args_is_help=True,
    help="Describe and alter client quotas (as kafka-configs.sh --entity-type users/clients/ips).",
)

DEFAULT = "<default>"

UserOpt = Annotated[
    str | None, typer.Option("--user", help="User (principal name); <default>: every user.")
]
ClientOpt = Annotated[
    str | None, typer.Option("--client-id", help="Client id; <default>: every client id.")
]
IpOpt = Annotated[str | None, typer.Option("--ip", help="Client IP; <default>: every IP.")]


def _entity(
    user: str | None, client_id: str | None, ip: str | None
) -> tuple[tuple[str, str | None], ...]:
    named = (("user", user), ("client-id", client_id), ("ip", ip))
    return tuple(
        sorted(
            (kind, None if value in (DEFAULT, "") else value)
            for kind, value in named
            if value is not None
        )
    )


def _show(name: str | None) -> str:
    return DEFAULT if name is None else name


@quotas_app.command("describe")
def quotas_describe(
    user: UserOpt = None,
    client_id: ClientOpt = None,
    ip: IpOpt = None,
    strict: Annotated[
        bool, typer.Option(help="Only the entity named, not its combinations with others.")
    ] = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """The quotas of every entity matching the options (none: every entity)."""
    from cluster.admin_quotas import describe_quotas

    with admin_errors():
        entries = describe_quotas(
            brokers(bootstrap, command_config), _entity(user, client_id, ip), strict
        )
    rows: list[list[object]] = []
    for entry in sorted(entries, key=lambda e: [(k, n or "") for k, n in e.entity]):
        names = dict(entry.entity)
        for key, value in sorted(entry.values.items()):
            rows.append(
                [
                    _show(names["user"]) if "user" in names else "",
                    _show(names["client-id"]) if "client-id" in names else "",
                    _show(names["ip"]) if "ip" in names else "",
                    key,
                    f"{value:.15g}",
                ]
            )
    print_table(None, ["USER", "CLIENT-ID", "IP", "QUOTA", "VALUE"], rows)


def _quota_values(pairs: list[str]) -> dict[str, float]:
    out = {}
    for pair in pairs:
        for item in pair.split(","):
            key, sep, value = item.partition("=")
            try:
                out[key.strip()] = float(value)
            except ValueError:
                raise typer.BadParameter(
                    f"{item!r}: expected key=number, e.g. producer_byte_rate=1048576"
                ) from None
            if not sep:
                raise typer.BadParameter(f"{item!r}: expected key=number")
    return out


@quotas_app.command("alter")
def quotas_alter(
    user: UserOpt = None,
    client_id: ClientOpt = None,
    ip: IpOpt = None,
    add_config: Annotated[
        list[str] | None,
        typer.Option(
            "--add-config",
            help="key=value[,key=value]: producer_byte_rate, consumer_byte_rate, "
            "request_percentage, controller_mutation_rate, connection_creation_rate.",
        ),
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="Quota keys to remove.")
    ] = None,
    validate_only: Annotated[bool, typer.Option(help="Check only, change nothing.")] = False,
    bootstrap: BootstrapOpt = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Set or remove quotas of one entity; every broker applies them within a second."""
    from cluster.admin_quotas import alter_quotas

    entity = _entity(user, client_id, ip)
    if not entity:
        raise typer.BadParameter("name the entity: --user, --client-id (or both) or --ip")
    add = _quota_values(add_config or [])
    delete = [k.strip() for d in delete_config or [] for k in d.split(",") if k.strip()]
    if not add and not delete:
        raise typer.BadParameter("nothing to change: give --add-config or --delete-config")
    with admin_errors():
        error = alter_quotas(brokers(bootstrap, command_config), entity, add, delete, validate_only)
    what = ", ".join(f"{kind} {_show(name)}" for kind, name in entity)
    if error is not None:
        typer.echo(f"rafka: {error}", err=True)
        raise typer.Exit(1)
    verb = "Validated quotas of" if validate_only else "Altered quotas of"
    typer.echo(f"{verb} {what}.")
