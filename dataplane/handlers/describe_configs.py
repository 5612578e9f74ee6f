"""DescribeConfigs (32) v0-v4: every setting of a topic, of this broker (or the cluster-wide
dynamic defaults: broker ""), or this broker's logger levels, with value, source, synonyms,
type and documentation (Kafka's ConfigHelper). v0, which Kafka 4 removed (its schema is in
`protocol/legacy`), has only an is-default flag where later versions have the source.

Sensitive settings (passwords, keys, sasl.jaas.config) are described without their value.
Authorization as Kafka's: DESCRIBE_CONFIGS on the topic, or on the cluster for broker and logger
resources. GROUP resources (and the other types of dataplane/config_resources.py) list every
config of their catalog, set or defaulted, guarded as their catalog says.
"""

from __future__ import annotations

from typing import Any

from kio.static.protocol import Payload

from dataplane import log_levels
from dataplane.config_catalog import ConfigEntry, ConfigLayers, ConfigSource, Synonym
from dataplane.config_resources import CATALOGS
from dataplane.handlers.context import Request
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.topic_planning import validate_topic_name

API_KEY = 32
VERSIONS = (0, 4)

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    for resource in req.resources:
        try:
            configs = _describe(ctx, b, resource, synonyms, docs)
            results.append(_result(b, resource, ErrorCode.none, None, configs))
        except KafkaError as e:
            results.append(_result(b, resource, e.code, e.message, ()))
    return b.DescribeConfigsResponse(throttle_time=0, results=tuple(results))


def _result(
    b: EntityBuilder, resource: Any, code: int, message: str | None, configs: Any
) -> Payload:
    """One resource's result; its error_message is "" unless there is one to give, as in
    Kafka (whose answers leave the field at its default)."""
    return b.DescribeConfigsResult(
        error_code=code,
        error_message=message or "",
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


def _describe(
    ctx: RequestContext, b: EntityBuilder, resource: Any, synonyms: bool, docs: bool
) -> tuple[Payload, ...]:
    kind, name = resource.resource_type, resource.resource_name
    wanted = set(resource.configuration_keys or ())
    services = ctx.services
    node_id = services.config.node_id
    if kind == TOPIC:
        if not services.authorizer.authorize(
            ctx.conn, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name
        ):
            raise KafkaError(ErrorCode.topic_authorization_failed, "Topic authorization failed.")
        if problem := validate_topic_name(name):
            raise KafkaError(ErrorCode.invalid_topic_exception, problem)
        topic = services.cache.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, None)
        entries = _layers(ctx).topic_entries(topic.configs)
        return _entries(b, entries, wanted, synonyms, docs, read_only=False)
    if kind in CATALOGS:
        return _entries(b, _resource_entries(ctx, kind, name), wanted, synonyms, docs, False)
    if kind not in (BROKER, BROKER_LOGGER):
        raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {kind}")
    if not services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if kind == BROKER:
        if name and _broker_id(name) != node_id:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {node_id} or empty string, but received {name}",
            )
        entries = _layers(ctx).broker_entries(cluster_default=not name)
        return _entries(b, entries, wanted, synonyms, docs, read_only=None)
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
    if _broker_id(name) != node_id:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id} but received {name}",
        )
    return tuple(
        b.DescribeConfigsResourceResult(
            name=logger,
            value=level,
            read_only=False,
            config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            is_default=False,
            is_sensitive=False,
            synonyms=(),
            documentation=None,
        )
        for logger, level in log_levels.loggers().items()
        if not wanted or logger in wanted
    )


def _resource_entries(ctx: RequestContext, kind: int, name: str) -> list[ConfigEntry]:
    """Kafka's ConfigHelper for GROUP (and CLIENT_METRICS) resources: every config of the
    type, the resource's own value (source GROUP_CONFIG / CLIENT_METRICS_CONFIG) or the
    broker's default, with the synonyms the catalog gives (the source is the first's); the
    resource need not exist."""
    catalog = CATALOGS[kind]
    services = ctx.services
    acl_name = name if catalog.acl_name is None else catalog.acl_name
    if not services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE_CONFIGS, catalog.acl_resource, acl_name
    ):
        raise KafkaError(catalog.denied, f"{catalog.label.capitalize()} authorization failed.")
    if not name:
        raise KafkaError(
            ErrorCode.invalid_request, f"{catalog.label.capitalize()} name must not be empty"
        )
    own = services.cache.resource_configs(kind, name)
    defaults = catalog.defaults(services.config)
    source = ConfigSource.GROUP_CONFIG if kind == GROUP else ConfigSource.CLIENT_METRICS_CONFIG
    layers = _layers(ctx)
    out = []
    for key in catalog.keys.values():
        default = defaults.get(key.name, key.default)
        found = [Synonym(key.name, own[key.name], source)] if key.name in own else []
        if catalog.broker_synonyms is not None:
            setting = catalog.broker_synonyms.get(key.name)
            if setting is not None:
                found += layers.synonyms(setting, key.sensitive)
            elif default is not None:
                found.append(Synonym(key.name, default, ConfigSource.DEFAULT_CONFIG))
        value = own.get(key.name, default)
        source_of = found[0].source if found else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(key, value, source_of, tuple(found)))
    return out


def _layers(ctx: RequestContext) -> ConfigLayers:
    return ConfigLayers.of(ctx.services.config, ctx.services.cache.broker_configs)


def _broker_id(name: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None


def _entries(
    b: EntityBuilder,
    entries: list[ConfigEntry],
    wanted: set[str],
    synonyms: bool,
    docs: bool,
    read_only: bool | None,
) -> tuple[Payload, ...]:
    """The response entries (`read_only` None: each setting's own flag)."""
    return tuple(
        b.DescribeConfigsResourceResult(
            name=e.key.name,
            value=e.value,
            read_only=e.key.read_only if read_only is None else read_only,
            config_source=e.source,
            is_default=e.source == ConfigSource.DEFAULT_CONFIG,
            is_sensitive=e.key.sensitive,
            synonyms=tuple(
                b.DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
                for s in e.synonyms
            )
            if synonyms
            else (),
            config_type=e.key.type,
            documentation=(e.key.doc or None) if docs else None,
        )
        for e in entries
        if not wanted or e.key.name in wanted
    )
