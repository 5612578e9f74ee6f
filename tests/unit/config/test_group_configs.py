"""GROUP config resources: Kafka's GroupConfig checks (dataplane/config_resources.py), the meta
state and watch events that store them (meta/resource_configs.py), IncrementalAlterConfigs of a
GROUP through config_admin with a meta service made of the real state machine, and a group's
resolved settings (dataplane/share/group_settings.py)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dataplane.config import BrokerConfig
from dataplane.config_admin import DELETE, SET, Change, alter
from dataplane.config_resources import GROUP, by_duration_ms, group_configs_problem
from dataplane.connection import Connection
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext
from dataplane.share.group_settings import GroupConfigs
from meta import wire
from meta.commands import Command
from meta.dispatch import apply
from meta.resource_configs import AlterResourceConfigs, ResourceConfigAlteration
from meta.state import MetaState

CONFIG = BrokerConfig.load(overrides={"node.id": "1"})


@pytest.mark.parametrize(
    ("configs", "problem"),
    [
        ({"share.record.lock.duration.ms": "20000"}, None),
        ({"share.auto.offset.reset": "by_duration:PT1H30M"}, None),
        ({"share.isolation.level": "read_committed", "share.delivery.count.limit": "3"}, None),
        ({"nope": "1"}, "Unknown group config name: nope"),
        ({"share.session.timeout.ms": "x"}, "Not a number of type INT"),
        ({"share.record.lock.duration.ms": "999"}, "Value must be at least 1000"),
        # Kafka 4.4's texts
        (
            {"share.record.lock.duration.ms": "10000"},
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
        (
            {"share.delivery.count.limit": "11"},
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
        ),
        (
            {"share.auto.offset.reset": "sometimes"},
            "Invalid value sometimes for configuration share.auto.offset.reset: Invalid value "
            "`sometimes` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
        ({"share.auto.offset.reset": "by_duration:-PT1H"}, "The value must be either"),
        ({"share.isolation.level": "serializable"}, "read_committed, read_uncommitted"),
        (
            {"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "45000"},
            None,
        ),
        (
            {"consumer.heartbeat.interval.ms": "15000", "consumer.session.timeout.ms": "45000"},
            None,
        ),
    ],
)
def test_group_config_checks(configs: dict[str, str], problem: str | None) -> None:
    found = group_configs_problem(configs, CONFIG)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_session_must_exceed_heartbeat() -> None:
    config = CONFIG.model_copy(update={"group_share_max_heartbeat_interval_ms": 60_000})
    found = group_configs_problem(
        {"share.heartbeat.interval.ms": "50000", "share.session.timeout.ms": "45000"}, config
    )
    assert found == "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"


def test_iso_durations() -> None:
    assert by_duration_ms("PT1H30M") == 5_400_000
    assert by_duration_ms("P1DT0.5S") == 86_400_500
    assert by_duration_ms("PT") is None
    assert by_duration_ms("1H") is None


class MetaFromState:
    """The meta service's resource configs: the real state machine, its watch events fed to
    the broker's metadata cache (as the Watch stream does)."""

    def __init__(self, cache: MetadataCache) -> None:
        self.state = MetaState()
        self.cache = cache

    async def alter_resource_configs(
        self, alterations: Sequence[ResourceConfigAlteration], validate_only: bool = False
    ) -> list[tuple[int, str]]:
        cmd = Command(uuid.uuid4().hex, 0, AlterResourceConfigs(tuple(alterations), validate_only))
        applied = apply(self.state, cmd)
        for change in applied.changes:
            self.cache.apply(wire.change_event(self.state, change))
        return [(o.error_code, o.error_message) for o in applied.result]


def context(cache: MetadataCache, allow: bool = True) -> Any:
    services = SimpleNamespace(
        config=CONFIG,
        cache=cache,
        meta=MetaFromState(cache),
        authorizer=SimpleNamespace(authorize=lambda *a, **k: allow),
    )
    return RequestContext(services, SimpleNamespace(), Connection("p"), {})  # type: ignore[arg-type]


def run(ctx: Any, changes: list[Change], validate_only: bool = False) -> list[Any]:
    return anyio.run(alter, ctx, changes, validate_only)


def test_incremental_alter_of_a_group_resource_reaches_the_cache_and_the_settings() -> None:
    cache = MetadataCache()
    ctx = context(cache)
    settings = GroupConfigs(CONFIG, cache)
    assert settings.share("g").record_lock_duration_ms == 30_000
    assert settings.share_session_timeout_ms("g") == CONFIG.group_share_session_timeout_ms
    ok = run(ctx, [Change(GROUP, "g", (("share.record.lock.duration.ms", SET, "20000"),
                                       ("share.auto.offset.reset", SET, "earliest")))])  # fmt: skip
    assert ok == [(ErrorCode.none, None)]
    assert cache.resource_configs(GROUP, "g") == {
        "share.record.lock.duration.ms": "20000",
        "share.auto.offset.reset": "earliest",
    }
    assert cache.resource_names(GROUP) == ["g"]
    s = settings.share("g")
    assert (s.record_lock_duration_ms, s.auto_offset_reset) == (20_000, "earliest")
    assert settings.share("other").auto_offset_reset == "latest"
    # DELETE of every config removes the resource
    run(ctx, [Change(GROUP, "g", (("share.record.lock.duration.ms", DELETE, None),
                                  ("share.auto.offset.reset", DELETE, None)))])  # fmt: skip
    assert cache.resource_names(GROUP) == []
    assert settings.share("g").record_lock_duration_ms == 30_000


def test_refusals() -> None:
    cache = MetadataCache()
    ((code, message),) = run(context(cache), [Change(GROUP, "g", (("nope", SET, "1"),))])
    assert code == ErrorCode.invalid_config
    assert message == "Unknown group config name: nope"
    ((code, _),) = run(context(cache), [Change(GROUP, "", (("share.isolation.level", SET, "x"),))])
    assert code == ErrorCode.invalid_request
    denied = run(context(cache, allow=False), [Change(GROUP, "g", ())])
    assert denied[0][0] == ErrorCode.group_authorization_failed
    # validate_only changes nothing
    run(context(cache), [Change(GROUP, "g", (("share.delivery.count.limit", SET, "3"),))], True)
    assert cache.resource_names(GROUP) == []


def test_out_of_bounds_values_are_capped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    cache = MetadataCache()
    meta = MetaFromState(cache)
    alteration = ResourceConfigAlteration(GROUP, "g", {"share.delivery.count.limit": "9"})
    anyio.run(meta.alter_resource_configs, [alteration])
    narrower = CONFIG.model_copy(update={"group_share_max_delivery_count_limit": 6})
    with caplog.at_level(logging.WARNING):
        assert GroupConfigs(narrower, cache).share("g").delivery_count_limit == 6
    assert "outside the broker's allowed range" in caplog.text
