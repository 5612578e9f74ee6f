"""CreateTopics (19): validate_only, -1 defaults, manual assignments and topic configs.

Authorization as Kafka's: CREATE on the cluster, or on each topic (TOPIC_AUTHORIZATION_FAILED);
a created topic's configs are returned only with DESCRIBE_CONFIGS on it (v5+
topic_config_error_code TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.config_admin import topic_configs_problem
from dataplane.config_catalog import ConfigLayers
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.quota import throttle as quota
from dataplane.request_context import RequestContext, Response
from dataplane.topic_admin import NewTopic
from dataplane.topic_configs import effective_topic_configs
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.topic_config import unknown_topic_config
from meta.topic_planning import validate_topic_name

if TYPE_CHECKING:
    from kio.schema.create_topics import v2, v3, v4, v5, v6, v7

CreateTopicsRequest: TypeAlias = (
    "v2.CreateTopicsRequest | v3.CreateTopicsRequest | v4.CreateTopicsRequest"
    " | v5.CreateTopicsRequest | v6.CreateTopicsRequest | v7.CreateTopicsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 19
VERSIONS = (2, 7)
_STRICT_QUOTA_VERSION = 6  # KIP-599: from v6 a mutation over the quota is refused
METADATA_TOPIC = "__cluster_metadata"  # KRaft's metadata log: never a topic clients create


async def handle(ctx: RequestContext, req: CreateTopicsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    counts = Counter(t.name for t in req.topics)
    results: dict[str, Any] = {}
    todo: list[NewTopic] = []
    denied, hidden_configs = _refusals(ctx, list(counts))

    def refused(name: str, code: ErrorCode, message: str) -> Payload:
        """A topic refused before creation (counts at Kafka's -1: none were decided)."""
        return b.CreatableTopicResult(
            name=name,
            topic_id=None,
            error_code=code,
            error_message=message,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )

    for t in req.topics:
        if counts[t.name] > 1 or t.name == METADATA_TOPIC:
            results[t.name] = refused(
                t.name,
                ErrorCode.invalid_request,
                "Duplicate topic name."
                if counts[t.name] > 1
                else f"Creation of internal topic {METADATA_TOPIC} is prohibited.",
            )
        elif t.name in denied:
            results[t.name] = refused(
                t.name, ErrorCode.topic_authorization_failed, "Authorization failed."
            )
        elif refusal := _config_refusal(ctx, t):
            results[t.name] = refused(t.name, ErrorCode.invalid_config, refusal)
        elif not _within_mutation_quota(ctx, req, t):
            results[t.name] = refused(t.name, ErrorCode.throttling_quota_exceeded, quota.THROTTLED)
        else:
            todo.append(
                NewTopic(
                    t.name,
                    t.num_partitions,
                    t.replication_factor,
                    [(a.partition_index, list(a.broker_ids)) for a in t.assignments],
                    {c.name: c.value for c in t.configs if c.value is not None},
                )
            )
    # the broker defaults in force: static settings under the dynamic broker configs
    broker = ConfigLayers.of(ctx.services.config, ctx.services.cache.broker_configs)
    for r in await ctx.services.topic_admin.create_topics(todo, req.validate_only):
        ok = r.error_code == 0
        configs = None
        if ok and r.name not in hidden_configs:
            configs = tuple(
                b.CreatableTopicConfigs(
                    name=name,
                    value=v.value,
                    read_only=False,
                    config_source=v.source,
                    is_sensitive=False,
                )
                for name, v in effective_topic_configs(broker, dict(r.configs)).items()
            )
        results[r.name] = b.CreatableTopicResult(
            name=r.name,
            topic_id=bytes(r.topic_id) if ok and r.topic_id else None,
            error_code=r.error_code,
            error_message=r.error_message or None,
            # a topic the creator may not describe: no counts either (Kafka's -1)
            num_partitions=r.num_partitions if configs is not None else -1,
            replication_factor=r.replication_factor if configs is not None else -1,
            configs=configs,
            topic_config_error_code=ErrorCode.topic_authorization_failed
            if r.name in hidden_configs
            else ErrorCode.none,
        )
    return b.CreateTopicsResponse(
        throttle_time=0,
        topics=tuple(results[name] for name in dict.fromkeys(t.name for t in req.topics)),
    )


def _config_refusal(ctx: RequestContext, t: Any) -> str | None:
    """What Kafka's controller says of null config values, of names that are not topic
    configs (the meta service still accepts the ones Kafka 4 removed: meta.topic_config) and
    of values, alone and together (LogConfig.validate, as AlterConfigs checks them). Kafka
    checks the name first: a topic whose name is bad or taken is left to the meta service,
    which says so."""
    if validate_topic_name(t.name) or t.name in ctx.services.cache.topics:
        return None
    if nulls := [c.name for c in t.configs if c.value is None]:
        return f"Null value not supported for topic configs: {','.join(nulls)}"
    configs = {c.name: c.value for c in t.configs}
    return unknown_topic_config(configs) or topic_configs_problem(ctx, configs)


def _within_mutation_quota(ctx: RequestContext, req: Any, t: Any) -> bool:
    """controller_mutation_rate: the topic's partitions are mutations (none for
    validate_only, which creates nothing)."""
    if not ctx.services.quotas.mutation.enabled or req.validate_only:
        return True
    count = len(t.assignments) or t.num_partitions
    if count < 0:
        count = ctx.services.config.num_partitions
    return quota.mutations(ctx, count, _STRICT_QUOTA_VERSION)


def _refusals(ctx: RequestContext, names: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(the topics the principal may not create, those whose configs it may not see)."""
    authorizer = ctx.services.authorizer
    if not authorizer.enabled:
        return frozenset(), frozenset()
    conn, topic = ctx.conn, ResourceType.TOPIC
    denied: frozenset[str] = frozenset()
    if not authorizer.authorize(
        conn, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        denied = authorizer.denied(conn, AclOperation.CREATE, topic, names)
    hidden = authorizer.denied(conn, AclOperation.DESCRIBE_CONFIGS, topic, names, log_denied=False)
    return denied, hidden
