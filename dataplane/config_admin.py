"""What AlterConfigs (33) and IncrementalAlterConfigs (44) share: the checks Kafka's broker and
controller make (ConfigAdminManager.preprocess, ControllerConfigurationValidator,
ConfigurationControlManager), then one call to the meta service for the topic and broker configs
that pass; BROKER_LOGGER changes apply here only (log_levels.py), as in Kafka.

Topic configs are checked against meta/topic_config.py and by building the LogConfig they make
(INVALID_CONFIG, as Kafka's controller answers); broker configs must be settings Rafka changes at
runtime with valid values (INVALID_REQUEST, as Kafka's broker answers: KAFKA-13609). GROUP (and
the other types of config_resources.py) are checked against their catalog (INVALID_CONFIG) and
stored by the meta service's resource configs, whether or not the group exists.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane import log_levels
from dataplane.config_catalog import (
    BROKER_KEYS,
    CLUSTER_DEFAULT,
    READ_AT_START,
    TOPIC_KEYS,
    ConfigLayers,
    ConfigType,
    broker_key,
)
from dataplane.config_resources import CATALOGS
from dataplane.log.log_config import LogConfig
from dataplane.protocol.errors import ErrorCode
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError
from meta.model import ConfigAlteration
from meta.resource_configs import ResourceConfigAlteration
from meta.topic_config import unknown_topic_config, validate_topic_configs
from meta.topic_planning import validate_topic_name

if TYPE_CHECKING:  # handlers import this module
    from dataplane.metadata_cache import MetadataCache
    from dataplane.request_context import RequestContext

log = logging.getLogger("rafka.config")

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_CACHE_WAIT_S = 5.0

Result = tuple[int, str | None]
Alteration = ConfigAlteration | ResourceConfigAlteration


@dataclass(frozen=True, slots=True)
class Change:
    """One resource of a request: (config name, operation, value) triples; AlterConfigs'
    entries are SETs that together replace the resource's configs (`replace`)."""

    resource_type: int
    name: str
    ops: tuple[tuple[str, int, str | None], ...]
    replace: bool = False


class Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def alter(
    ctx: RequestContext, changes: Sequence[Change], validate_only: bool
) -> list[Result]:
    """The result of each change, in order."""
    results: list[Result | None] = [None] * len(changes)
    pending: list[tuple[int, Alteration, Mapping[str, str]]] = []
    seen = Counter((c.resource_type, c.name) for c in changes)
    for i, change in enumerate(changes):
        try:
            if seen[change.resource_type, change.name] > 1:
                raise Refused(ErrorCode.invalid_request, "Each resource must appear at most once.")
            alteration = _prepare(ctx, change, validate_only)
        except Refused as e:
            log.info(
                "refused a config change of %s %r: %s",
                _TYPE_NAMES.get(change.resource_type, change.resource_type),
                change.name,
                e,
            )
            results[i] = (e.code, str(e))
            continue
        if alteration is None:
            results[i] = (ErrorCode.none, None)
        else:
            pending.append((i, *alteration))
    if pending:
        for (i, _, _), result in zip(
            pending, await _store(ctx, pending, validate_only), strict=True
        ):
            results[i] = result
    return [r if r is not None else (ErrorCode.unknown_server_error, None) for r in results]


_TYPE_NAMES = {TOPIC: "topic", BROKER: "broker", BROKER_LOGGER: "broker logger"}


def _prepare(
    ctx: RequestContext, change: Change, validate_only: bool
) -> tuple[Alteration, Mapping[str, str]] | None:
    """The meta alteration of the change and the configs it leaves, or None when the change
    is done (BROKER_LOGGER); raises `Refused`."""
    kind = change.resource_type
    if (
        kind not in (TOPIC, BROKER)
        and kind not in CATALOGS
        and not (kind == BROKER_LOGGER and not change.replace)
    ):
        raise Refused(ErrorCode.invalid_request, f"Unknown resource type {kind}")
    _authorize(ctx, kind, change.name)
    names = Counter(name for name, _, _ in change.ops)
    if any(count > 1 for count in names.values()):
        raise Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [name for name, op, value in change.ops if op != DELETE and value is None]
    if nulls:
        raise Refused(
            ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"
        )
    for _name, op, _ in change.ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise Refused(ErrorCode.invalid_request, f"Unknown operations type {op}")
    node_id = ctx.services.config.node_id
    if kind == BROKER_LOGGER:
        _check_node_id(change.name, node_id)
        try:
            log_levels.validate(change.ops, ErrorCode.invalid_config, ErrorCode.invalid_request)
        except log_levels.LoggerConfigError as e:
            raise Refused(e.code, str(e)) from None
        if not validate_only:
            log_levels.apply(change.ops)
        return None
    if kind == BROKER:
        return _broker_alteration(ctx, change, node_id)
    if kind in CATALOGS:
        return _resource_alteration(ctx, change)
    return _topic_alteration(ctx, change)


def _authorize(ctx: RequestContext, kind: int, name: str) -> None:
    """ALTER_CONFIGS on the topic, or on the cluster for broker and logger configs."""
    authorizer = ctx.services.authorizer
    catalog = CATALOGS.get(kind)
    if catalog is not None:
        acl_name = name if catalog.acl_name is None else catalog.acl_name
        if not authorizer.authorize(
            ctx.conn, AclOperation.ALTER_CONFIGS, catalog.acl_resource, acl_name
        ):
            denied = catalog.denied
            raise Refused(denied, f"{catalog.label.capitalize()} authorization failed.")
    elif kind == TOPIC:
        if not authorizer.authorize(ctx.conn, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name):
            raise Refused(ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    elif not authorizer.authorize(
        ctx.conn, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        raise Refused(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")


def _check_node_id(name: str, node_id: int) -> None:
    """Broker and logger resources name this broker (clients send them to it)."""
    try:
        requested = int(name)
    except ValueError:
        raise Refused(
            ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}"
        ) from None
    if requested != node_id:
        raise Refused(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id}, but received {name}",
        )


def apply_ops(
    current: Mapping[str, str],
    change: Change,
    list_type: Mapping[str, bool],
    defaults: Mapping[str, str | None],
) -> dict[str, str]:
    """The configs `change` leaves (Kafka's prepareIncrementalConfigs / incrementalAlterConfig
    Resource): SET, DELETE, and APPEND / SUBTRACT of comma-separated items on LIST settings."""
    if change.replace:
        return {name: value or "" for name, _, value in change.ops}
    out = dict(current)
    for name, op, value in change.ops:
        if op == SET:
            out[name] = value or ""
        elif op == DELETE:
            out.pop(name, None)
        else:
            verb = "APPEND" if op == APPEND else "SUBTRACT"
            if not list_type.get(name, False):
                raise Refused(
                    ErrorCode.invalid_config,
                    f"Can't {verb} to key {name} because its type is not LIST.",
                )
            old = out.get(name, defaults.get(name)) or ""
            items = [item for item in old.split(",") if item]
            given = (value or "").split(",")
            if op == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            out[name] = ",".join(items)
    return out


def _broker_alteration(
    ctx: RequestContext, change: Change, node_id: int
) -> tuple[ConfigAlteration, Mapping[str, str]]:
    if change.name:
        _check_node_id(change.name, node_id)
    scope = node_id if change.name else CLUSTER_DEFAULT
    current = dict(ctx.services.cache.broker_configs.get(scope, {}))
    keys = {name: broker_key(name) for name, _, _ in change.ops}
    new = apply_ops(
        current,
        change,
        {n: k is not None and k.type is ConfigType.LIST for n, k in keys.items()},
        {n: k.default if k is not None else None for n, k in keys.items()},
    )
    unknown = sorted(n for n in new if broker_key(n) is None)
    if unknown:
        raise Refused(ErrorCode.invalid_request, f"Unknown broker configs: {', '.join(unknown)}")
    fixed = sorted(n for n in new if n not in BROKER_KEYS or not BROKER_KEYS[n].dynamic)
    if fixed:
        message = f"Cannot update these configs dynamically: [{', '.join(fixed)}]"
        if later := [n for n in fixed if n not in BROKER_KEYS or n in READ_AT_START]:
            message += (
                f" ({', '.join(later)}: dynamic in Kafka, read at start-up by Rafka: set them "
                "in the broker's properties and restart it)"
            )
        raise Refused(ErrorCode.invalid_request, message)
    for name, value in new.items():
        if problem := BROKER_KEYS[name].problem(value):
            raise Refused(ErrorCode.invalid_request, problem)
    return _alteration("broker", change, current, new), new


def _topic_alteration(
    ctx: RequestContext, change: Change
) -> tuple[ConfigAlteration, Mapping[str, str]]:
    if not change.name:
        raise Refused(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    if problem := validate_topic_name(change.name):
        raise Refused(ErrorCode.invalid_topic_exception, problem)
    topic = ctx.services.cache.topics.get(change.name)
    if topic is None:
        raise Refused(
            ErrorCode.unknown_topic_or_partition, f"The topic '{change.name}' does not exist."
        )
    current = dict(topic.configs)
    new = apply_ops(
        current,
        change,
        {n: k.type is ConfigType.LIST for n, k in TOPIC_KEYS.items()},
        {n: k.default for n, k in TOPIC_KEYS.items()},
    )
    changed = [n for n, v in new.items() if current.get(n) != v]
    if problem := unknown_topic_config(changed) or topic_configs_problem(ctx, new):
        raise Refused(ErrorCode.invalid_config, problem)
    return _alteration("topic", change, current, new), new


def _resource_alteration(
    ctx: RequestContext, change: Change
) -> tuple[ResourceConfigAlteration, Mapping[str, str]]:
    """A GROUP (or other catalogued type) resource: its whole config set is validated
    (INVALID_CONFIG, as Kafka's controller answers); the resource need not exist."""
    catalog = CATALOGS[change.resource_type]
    if not change.name:
        raise Refused(
            ErrorCode.invalid_request, f"Default {catalog.label} resources are not allowed."
        )
    current = dict(ctx.services.cache.resource_configs(change.resource_type, change.name))
    config = ctx.services.config
    new = apply_ops(current, change, {}, catalog.defaults(config))
    if problem := catalog.problem(new, config):
        raise Refused(ErrorCode.invalid_config, problem)
    if change.replace:
        alteration = ResourceConfigAlteration(
            change.resource_type, change.name, dict(new), (), replace=True
        )
    else:
        alteration = ResourceConfigAlteration(
            change.resource_type,
            change.name,
            {k: v for k, v in new.items() if current.get(k) != v},
            tuple(k for k in current if k not in new),
        )
    return alteration, new


def topic_configs_problem(ctx: RequestContext, configs: Mapping[str, str]) -> str | None:
    """Kafka's LogConfig.validate: each value, then the log settings they make together."""
    if problem := validate_topic_configs(configs):
        return problem
    layers = ConfigLayers.of(ctx.services.config, ctx.services.cache.broker_configs)
    try:
        log_config = LogConfig.from_configs(layers.effective, dict(configs))
    except ValueError as e:
        return f"Invalid topic configs: {e}"
    if log_config.min_compaction_lag_ms > log_config.max_compaction_lag_ms:
        return (
            f"conflict topic config setting min.compaction.lag.ms "
            f"({log_config.min_compaction_lag_ms}) > max.compaction.lag.ms "
            f"({log_config.max_compaction_lag_ms})"
        )
    return None


def _alteration(
    kind: str, change: Change, current: Mapping[str, str], new: Mapping[str, str]
) -> ConfigAlteration:
    if change.replace:
        return ConfigAlteration(kind, change.name, dict(new), (), replace=True)  # type: ignore[arg-type]
    return ConfigAlteration(
        kind,  # type: ignore[arg-type]
        change.name,
        {k: v for k, v in new.items() if current.get(k) != v},
        tuple(k for k in current if k not in new),
    )


async def _store(
    ctx: RequestContext,
    pending: Sequence[tuple[int, Alteration, Mapping[str, str]]],
    validate_only: bool,
) -> list[Result]:
    """Ask the meta service, then wait until this broker's metadata shows the new configs (a
    describe right after sees them)."""
    services = ctx.services
    classic = [a for _, a, _ in pending if isinstance(a, ConfigAlteration)]
    resources = [a for _, a, _ in pending if isinstance(a, ResourceConfigAlteration)]
    try:
        by_kind = iter(await services.meta.alter_configs(classic, validate_only) if classic else [])
        by_resource = iter(
            await services.meta.alter_resource_configs(resources, validate_only)
            if resources
            else []
        )
        answers = [
            next(by_kind) if isinstance(a, ConfigAlteration) else next(by_resource)
            for _, a, _ in pending
        ]
    except MetaError as e:
        log.warning("altering configs failed: the meta service did not answer (%s)", e)
        return [(ErrorCode.request_timed_out, f"meta service unavailable: {e}")] * len(pending)
    stored = [
        (a, new) for (_, a, new), (code, _) in zip(pending, answers, strict=True) if code == 0
    ]
    if stored and not validate_only:

        def cached() -> bool:
            return all(_cached_configs(services.cache, a) == dict(new) for a, new in stored)

        await services.cache.wait_until(cached, _CACHE_WAIT_S)
    return [(code, message or None) for code, message in answers]


def _cached_configs(cache: MetadataCache, alteration: Alteration) -> dict[str, str] | None:
    if isinstance(alteration, ResourceConfigAlteration):
        return dict(cache.resource_configs(alteration.resource_type, alteration.name))
    if alteration.resource_type == "topic":
        topic = cache.topics.get(alteration.name)
        return None if topic is None else dict(topic.configs)
    scope = int(alteration.name) if alteration.name else CLUSTER_DEFAULT
    return dict(cache.broker_configs.get(scope, {}))
