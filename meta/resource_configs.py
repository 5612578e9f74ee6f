"""Dynamic configs of config resources that are no topic and no broker: GROUP (Kafka's
ConfigResource type 32, KIP-848/KIP-932 group configs) and CLIENT_METRICS (16, KIP-714
subscriptions), kept in ``MetaState.resource_configs`` keyed by (resource type, name).

Like Kafka's ConfigurationControlManager for these types: the resource need not exist (a group's
configs may be set before its first member joins), values were validated by the broker against
the type's catalog, and a resource left without configs is removed. The command and its
versioned record converters live here; ``meta.dispatch`` only dispatches to ``alter``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from meta.protocol import ErrorCode
from proto import metadata_records_pb2 as pb

if TYPE_CHECKING:
    from meta.state import MetaState

log = logging.getLogger("rafka.meta.resource_configs")

CLIENT_METRICS = 16
GROUP = 32
RESOURCE_TYPES = {GROUP: "group", CLIENT_METRICS: "client metrics"}

ResourceKey = tuple[int, str]


@dataclass(frozen=True)
class ResourceConfigAlteration:
    """The configs of one resource to change: ``replace`` makes them exactly ``set`` (an empty
    ``set`` removes them all, as when a group is deleted); otherwise ``set`` is applied, then
    ``delete`` removed."""

    resource_type: int
    name: str
    set: Mapping[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    replace: bool = False


@dataclass(frozen=True)
class AlterResourceConfigs:
    """IncrementalAlterConfigs / AlterConfigs of GROUP and CLIENT_METRICS resources, and the
    removal of a deleted group's configs."""

    alterations: tuple[ResourceConfigAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class ResourceOutcome:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


class Changes(Protocol):
    def resource_config(self, resource_type: int, name: str) -> None: ...


def refusal(alteration: ResourceConfigAlteration) -> ResourceOutcome | None:
    """Why the meta service refuses the alteration (the broker checked names and values)."""
    kind = RESOURCE_TYPES.get(alteration.resource_type)
    if kind is None:
        return ResourceOutcome(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {alteration.resource_type}"
        )
    if not alteration.name:
        return ResourceOutcome(ErrorCode.INVALID_REQUEST, f"The {kind} name must not be empty.")
    return None


def alter(state: MetaState, cmd: AlterResourceConfigs, changes: Changes) -> list[ResourceOutcome]:
    outcomes = []
    for alteration in cmd.alterations:
        refused = refusal(alteration)
        if refused is not None:
            log.warning(
                "Refused to alter the configs of resource type %d %r: %s",
                alteration.resource_type,
                alteration.name,
                refused.error_message,
            )
            outcomes.append(refused)
            continue
        outcomes.append(ResourceOutcome())
        if cmd.validate_only:
            continue
        key = (alteration.resource_type, alteration.name)
        old = state.resource_configs.get(key, {})
        new = {} if alteration.replace else dict(old)
        new.update(alteration.set)
        for name in alteration.delete:
            new.pop(name, None)
        if new == old:
            continue
        if new:
            state.resource_configs[key] = new
        else:
            state.resource_configs.pop(key, None)
        changes.resource_config(*key)
        log.info(
            "Altered the configs of %s %s: set %s, removed %s",
            RESOURCE_TYPES[alteration.resource_type],
            alteration.name,
            sorted(alteration.set),
            sorted(set(old) - set(new)),
        )
    return outcomes


# ---------------------------------------------------------------- versioned records


def _configs(configs: Mapping[str, str]) -> list[pb.Config]:
    return [pb.Config(name=name, value=value) for name, value in configs.items()]


def _configs_from(configs: Iterable[pb.Config]) -> dict[str, str]:
    return {c.name: c.value for c in configs}


def alteration_to_proto(a: ResourceConfigAlteration) -> pb.ResourceConfigAlteration:
    """The message of the gRPC request and of the stored command alike."""
    return pb.ResourceConfigAlteration(
        resource_type=a.resource_type,
        name=a.name,
        set_configs=_configs(a.set),
        delete_configs=a.delete,
        replace=a.replace,
    )


def alteration_from_proto(a: pb.ResourceConfigAlteration) -> ResourceConfigAlteration:
    configs = _configs_from(a.set_configs)
    return ResourceConfigAlteration(
        a.resource_type, a.name, configs, tuple(a.delete_configs), a.replace
    )


def command_record(cmd: AlterResourceConfigs) -> pb.AlterResourceConfigs:
    return pb.AlterResourceConfigs(
        alterations=[alteration_to_proto(a) for a in cmd.alterations],
        validate_only=cmd.validate_only,
    )


def command_from(record: pb.AlterResourceConfigs) -> AlterResourceConfigs:
    alterations = tuple(alteration_from_proto(a) for a in record.alterations)
    return AlterResourceConfigs(alterations, record.validate_only)


def result_record(outcomes: list[ResourceOutcome]) -> pb.AlterConfigsResult:
    return pb.AlterConfigsResult(
        resources=[
            pb.Outcome(error_code=o.error_code, error_message=o.error_message) for o in outcomes
        ]
    )


def result_from(record: pb.AlterConfigsResult) -> list[ResourceOutcome]:
    return [ResourceOutcome(ErrorCode(o.error_code), o.error_message) for o in record.resources]


def state_records(configs: Mapping[ResourceKey, Mapping[str, str]]) -> list[pb.ResourceConfigs]:
    return [
        pb.ResourceConfigs(resource_type=kind, name=name, configs=_configs(values))
        for (kind, name), values in configs.items()
    ]


def state_from(records: list[pb.ResourceConfigs]) -> dict[ResourceKey, dict[str, str]]:
    return {(r.resource_type, r.name): _configs_from(r.configs) for r in records}
