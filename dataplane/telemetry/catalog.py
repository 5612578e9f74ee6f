"""The settings of a CLIENT_METRICS config resource (Kafka's ClientMetricsConfigs) and their
validation, for IncrementalAlterConfigs/DescribeConfigs and for reading subscriptions.

A subscription names the metric prefixes it wants (``metrics``: a list; ``*`` for all), how
often the matching clients push (``interval.ms``) and which clients match (``match``: a list of
``selector=regex``, each selector one of the client's attributes, every one of them must match
the whole attribute; no selector matches every client).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from dataplane.config_catalog import ConfigKey, ConfigType

CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"

INTERVAL_MS_DEFAULT = 300_000
INTERVAL_MS_MIN = 100
INTERVAL_MS_MAX = 3_600_000
ALL_METRICS = "*"

SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey(
            METRICS,
            ConfigType.LIST,
            "Telemetry metric name prefixes the matching clients push; * for all metrics.",
            None,
            dynamic="client_metrics",
        ),
        ConfigKey(
            INTERVAL_MS,
            ConfigType.INT,
            f"How often (ms) the matching clients push, {INTERVAL_MS_MIN} to {INTERVAL_MS_MAX}.",
            None,
            dynamic="client_metrics",
        ),
        ConfigKey(
            MATCH,
            ConfigType.LIST,
            "Client selectors, selector=regex (selectors: "
            + ", ".join(SELECTORS)
            + "); a client matches when each regex matches its whole attribute. Empty: every "
            "client.",
            None,
            dynamic="client_metrics",
        ),
    )
}


def defaults(_config: object) -> dict[str, str]:
    """The value of each setting a subscription does not set (Kafka's ClientMetricsConfigs)."""
    return {METRICS: "", INTERVAL_MS: str(INTERVAL_MS_DEFAULT), MATCH: ""}


def problem(configs: Mapping[str, str], _config: object) -> str | None:
    """Why a subscription's whole config set is invalid (INVALID_CONFIG), or None; the name
    is checked by `parse` when read."""
    try:
        parse("subscription", configs)
    except InvalidClientMetricsConfig as e:
        return str(e)
    return None


class InvalidClientMetricsConfig(ValueError):
    """A CLIENT_METRICS setting Kafka would refuse (INVALID_CONFIG); the message says why."""


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


@dataclass(frozen=True)
class Subscription:
    """One CLIENT_METRICS resource, parsed."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return all(
            pattern.fullmatch(attributes.get(selector, "")) for selector, pattern in self.match
        )


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    """The subscription `configs` describe; InvalidClientMetricsConfig if they are invalid."""
    if not name:
        raise InvalidClientMetricsConfig("a CLIENT_METRICS resource needs a non-empty name")
    unknown = sorted(set(configs) - set(KEYS))
    if unknown:
        raise InvalidClientMetricsConfig(
            f"Unknown client metrics config name: {', '.join(unknown)} (valid: "
            + ", ".join(KEYS)
            + ")"
        )
    return _parse(
        name,
        configs.get(METRICS, ""),
        configs.get(INTERVAL_MS, str(INTERVAL_MS_DEFAULT)),
        configs.get(MATCH, ""),
    )


@lru_cache(maxsize=1024)
def _parse(name: str, metrics: str, interval: str, match: str) -> Subscription:
    try:
        interval_ms = int(interval)
    except ValueError:
        raise InvalidClientMetricsConfig(
            f"{INTERVAL_MS}={interval!r} of {name} is not an integer"
        ) from None
    if not INTERVAL_MS_MIN <= interval_ms <= INTERVAL_MS_MAX:
        raise InvalidClientMetricsConfig(
            f"{INTERVAL_MS}={interval_ms} of {name} is outside "
            f"[{INTERVAL_MS_MIN}, {INTERVAL_MS_MAX}]"
        )
    return Subscription(name, tuple(_list(metrics)), interval_ms, _patterns(name, match))


def _patterns(name: str, match: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for item in _list(match):
        selector, sep, regex = item.partition("=")
        selector = selector.strip()
        if not sep or not regex.strip():
            raise InvalidClientMetricsConfig(
                f"{MATCH} entry {item!r} of {name} must be selector=regex"
            )
        if selector not in SELECTORS:
            raise InvalidClientMetricsConfig(
                f"{MATCH} selector {selector!r} of {name} is not one of {', '.join(SELECTORS)}"
            )
        try:
            out.append((selector, re.compile(regex.strip())))
        except re.error as e:
            raise InvalidClientMetricsConfig(
                f"{MATCH} regex {regex!r} of {name} is invalid: {e}"
            ) from None
    return tuple(out)
