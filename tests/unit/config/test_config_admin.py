"""AlterConfigs / IncrementalAlterConfigs checks (dataplane/config_admin.py) against a stand-in
meta service, and the BROKER_LOGGER levels (dataplane/log_levels.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dataplane import log_levels
from dataplane.config import BrokerConfig
from dataplane.config_admin import (
    APPEND,
    BROKER,
    BROKER_LOGGER,
    DELETE,
    SET,
    SUBTRACT,
    TOPIC,
    Change,
    alter,
)
from dataplane.connection import Connection
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from meta.model import ConfigAlteration


class FakeMeta:
    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.calls: list[tuple[list[ConfigAlteration], bool]] = []

    async def alter_configs(
        self, alterations: Sequence[ConfigAlteration], validate_only: bool = False
    ) -> list[tuple[int, str]]:
        self.calls.append((list(alterations), validate_only))
        if not validate_only:  # as the watch stream would
            for a in alterations:
                if a.resource_type == "topic":
                    topic = self.cache.topics[a.name]
                    configs = {} if a.replace else dict(topic.configs)
                    configs.update(a.set)
                    for name in a.delete:
                        configs.pop(name, None)
                    self.cache.topics[a.name] = SimpleNamespace(configs=configs)
                else:
                    scope = int(a.name) if a.name else -1
                    configs = {} if a.replace else dict(self.cache.broker_configs.get(scope, {}))
                    configs.update(a.set)
                    for name in a.delete:
                        configs.pop(name, None)
                    self.cache.broker_configs[scope] = configs
        return [(0, "")] * len(alterations)


class FakeCache:
    def __init__(self) -> None:
        self.topics: dict[str, Any] = {"t": SimpleNamespace(configs={"cleanup.policy": "compact"})}
        self.broker_configs: dict[int, dict[str, str]] = {}

    async def wait_until(self, predicate: Any, timeout: float) -> bool:
        return bool(predicate())


class Authorizer:
    def __init__(self, allow: bool = True) -> None:
        self.allow = allow

    def authorize(self, *args: Any, **kwargs: Any) -> bool:
        return self.allow


def context(allow: bool = True) -> Any:
    cache = FakeCache()
    services = SimpleNamespace(
        config=BrokerConfig.load(overrides={"node.id": "1"}),
        cache=cache,
        meta=FakeMeta(cache),
        authorizer=Authorizer(allow),
    )
    header = SimpleNamespace(api_version=1, client_id="test")
    return RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]


def run(ctx: Any, *changes: Change, validate_only: bool = False) -> list[tuple[int, str | None]]:
    async def main() -> list[tuple[int, str | None]]:
        return await alter(ctx, changes, validate_only)

    return anyio.run(main)


def test_topic_set_delete_append_subtract() -> None:
    ctx = context()
    ops = (
        ("retention.ms", SET, "1000"),
        ("cleanup.policy", APPEND, "delete"),
        ("segment.bytes", DELETE, None),
    )
    assert run(ctx, Change(TOPIC, "t", ops)) == [(ErrorCode.none, None)]
    assert ctx.services.cache.topics["t"].configs == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "1000",
    }
    assert run(ctx, Change(TOPIC, "t", (("cleanup.policy", SUBTRACT, "compact"),))) == [(0, None)]
    assert ctx.services.cache.topics["t"].configs["cleanup.policy"] == "delete"
    (alteration,), validate_only = ctx.services.meta.calls[-1]
    assert alteration == ConfigAlteration("topic", "t", {"cleanup.policy": "delete"}, ())
    assert not validate_only


def test_legacy_alter_configs_replaces_the_set() -> None:
    ctx = context()
    assert run(ctx, Change(TOPIC, "t", (("retention.ms", SET, "5"),), replace=True)) == [(0, None)]
    assert ctx.services.cache.topics["t"].configs == {"retention.ms": "5"}


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (
            Change(TOPIC, "t", (("retention.ms", SET, "soon"),)),
            ErrorCode.invalid_config,
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            Change(TOPIC, "t", (("no.such.config", SET, "1"),)),
            ErrorCode.invalid_config,
            "Unknown topic config name: no.such.config",
        ),
        (
            Change(TOPIC, "t", (("retention.ms", APPEND, "1"),)),
            ErrorCode.invalid_config,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (
            Change(
                TOPIC,
                "t",
                (("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")),
            ),
            ErrorCode.invalid_config,
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
        (
            Change(TOPIC, "missing", (("retention.ms", SET, "1"),)),
            ErrorCode.unknown_topic_or_partition,
            "The topic 'missing' does not exist.",
        ),
        (
            Change(TOPIC, "", (("retention.ms", SET, "1"),)),
            ErrorCode.invalid_request,
            "Default topic resources are not allowed.",
        ),
        (
            Change(TOPIC, "t", (("retention.ms", SET, "1"), ("retention.ms", DELETE, None))),
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        ),
        (
            Change(TOPIC, "bad name", (("retention.ms", SET, "1"),)),
            ErrorCode.invalid_topic_exception,
            "Topic name is invalid: 'bad name' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'",
        ),
        (
            Change(TOPIC, "t", (("message.downconversion.enable", SET, "true"),)),
            ErrorCode.invalid_config,
            "Unknown topic config name: message.downconversion.enable",
        ),
        (
            Change(TOPIC, "t", (("retention.ms", SET, None),)),
            ErrorCode.invalid_request,
            "Null value not supported for : retention.ms",
        ),
        (
            Change(BROKER, "", (("log.dirs", SET, "/x"),)),
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: [log.dirs]",
        ),
        (
            Change(BROKER, "", (("ssl.client.auth", SET, "required"),)),
            ErrorCode.invalid_request,
            "Cannot update these configs dynamically: [ssl.client.auth] (ssl.client.auth: "
            "dynamic in Kafka, read at start-up by Rafka: set them in the broker's properties "
            "and restart it)",
        ),
        (
            Change(BROKER, "", (("message.max.bytes", SET, "big"),)),
            ErrorCode.invalid_request,
            "Invalid value big for configuration message.max.bytes: Not a number of type INT",
        ),
        (
            Change(BROKER, "2", (("message.max.bytes", SET, "5"),)),
            ErrorCode.invalid_request,
            "Unexpected broker id, expected 1, but received 2",
        ),
        (
            Change(BROKER, "", (("no.such.setting", SET, "5"),)),
            ErrorCode.invalid_request,
            "Unknown broker configs: no.such.setting",
        ),
        (
            Change(BROKER_LOGGER, "1", (("root", APPEND, "INFO"),)),
            ErrorCode.invalid_request,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        ),
        (
            Change(BROKER_LOGGER, "1", (("rafka", SET, "LOUD"),)),
            ErrorCode.invalid_config,
            "Cannot set the log level of rafka to LOUD as it is not a supported log level. Valid "
            "log levels are ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN",
        ),
        (
            Change(BROKER_LOGGER, "1", (("root", SET, "INFO"),), replace=True),
            ErrorCode.invalid_request,
            "Unknown resource type 8",
        ),
        (Change(64, "x", ()), ErrorCode.invalid_request, "Unknown resource type 64"),
    ],
)
def test_refusals_name_the_setting_and_why(change: Change, code: int, message: str) -> None:
    logging.getLogger("rafka")  # exists for the BROKER_LOGGER cases
    ctx = context()
    assert run(ctx, change) == [(code, message)]
    assert ctx.services.meta.calls == []


def test_authorization_per_resource_type() -> None:
    ctx = context(allow=False)
    results = run(
        ctx,
        Change(TOPIC, "t", (("retention.ms", SET, "1"),)),
        Change(BROKER, "", (("message.max.bytes", SET, "5000"),)),
    )
    assert [code for code, _ in results] == [
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
    ]


def test_a_resource_twice_is_refused_both_times() -> None:
    change = Change(TOPIC, "t", (("retention.ms", SET, "1"),))
    results = run(context(), change, change)
    assert results == [(ErrorCode.invalid_request, "Each resource must appear at most once.")] * 2


def test_broker_configs_per_broker_and_cluster_default() -> None:
    ctx = context()
    results = run(
        ctx,
        Change(BROKER, "", (("message.max.bytes", SET, "5000"),)),
        Change(BROKER, "1", (("log.retention.ms", SET, "60000"),)),
    )
    assert results == [(0, None), (0, None)]
    assert ctx.services.cache.broker_configs == {
        -1: {"message.max.bytes": "5000"},
        1: {"log.retention.ms": "60000"},
    }


def test_validate_only_stores_nothing() -> None:
    ctx = context()
    assert run(ctx, Change(TOPIC, "t", (("retention.ms", SET, "7"),)), validate_only=True) == [
        (0, None)
    ]
    assert ctx.services.cache.topics["t"].configs == {"cleanup.policy": "compact"}
    assert ctx.services.meta.calls[0][1] is True


def test_broker_logger_levels_change_live() -> None:
    logger = logging.getLogger("rafka.test.levels")
    logger.setLevel(logging.NOTSET)
    ctx = context()
    assert run(ctx, Change(BROKER_LOGGER, "1", (("rafka.test.levels", SET, "TRACE"),))) == [
        (0, None)
    ]
    assert logger.level == 5
    assert log_levels.loggers()["rafka.test.levels"] == "TRACE"
    assert run(ctx, Change(BROKER_LOGGER, "1", (("rafka.test.levels", DELETE, None),))) == [
        (0, None)
    ]
    assert logger.level == logging.NOTSET
    assert ctx.services.meta.calls == []  # not kept in the meta service, as in Kafka


def test_log_level_names() -> None:
    assert log_levels.level_name(logging.WARNING) == "WARN"
    assert log_levels.level_name(logging.CRITICAL) == "FATAL"
    assert log_levels.level_name(25) == "INFO"  # between levels: the one below
