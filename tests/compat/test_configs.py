"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: names, values, defaults, types,
sources, synonyms, read-only and sensitive flags of topic and broker configs."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, record

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
NAME = "compat-configs-topic"


@pytest.fixture(scope="module", autouse=True)
def topic(pair: Pair) -> None:
    create_topics(
        pair, NewTopic(NAME, 1, 1, config={"retention.ms": "123456", "cleanup.policy": "compact"})
    )


def describe(
    pair: Pair,
    resource_type: int,
    name: str,
    keys: tuple[str, ...] | None = None,
    synonyms: bool = True,
    documentation: bool = True,
) -> tuple[Any, Any]:
    b = builder(DESCRIBE_CONFIGS, 4)
    return pair.send(
        DESCRIBE_CONFIGS,
        4,
        resources=(
            b.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=keys
            ),
        ),
        include_synonyms=synonyms,
        include_documentation=documentation,
    )


def _by_name(answer: Any) -> dict[str, Any]:
    from tests.compat import diff

    (resource,) = diff.plain(answer)["results"]
    return {c["name"]: c for c in resource["configs"]}


def compare_configs(pair: Pair, what: str, kafka: Any, rafka: Any, broker: bool) -> None:
    """One row per config Kafka lists: the same value, source, flags, type, synonyms and
    documentation, or why not."""
    k, r = _by_name(kafka), _by_name(rafka)
    passed = True
    for name in sorted(k):
        kc = k[name]
        case = f"DescribeConfigs {what}: {name}"
        if name not in r:
            found = ["not listed by Rafka"]
            rtext = "absent"
        else:
            rc = r[name]
            found = [
                f"{field}: kafka={kc[field]!r} rafka={rc[field]!r}"
                for field in kc
                if kc[field] != rc[field] and not (broker and field in _BROKER_LOCAL)
            ]
            rtext = f"{rc['value']} ({rc['config_source']})"
        passed &= record(case, f"{kc['value']} ({kc['config_source']})", rtext, found, fail=False)
    extra = sorted(set(r) - set(k))
    passed &= record(
        f"DescribeConfigs {what}: configs Kafka does not list",
        "none",
        ", ".join(extra) or "none",
        [f"Rafka lists {n}" for n in extra],
        fail=False,
    )
    assert passed, f"DescribeConfigs {what} differs (the table says where)"


# A broker's own settings whose values differ between two installations by nature: its
# directories, listeners, ports and identity.
_BROKER_LOCAL = frozenset()


def test_topic_configs(pair: Pair) -> None:
    kafka, rafka = describe(pair, TOPIC, NAME)
    compare_configs(pair, "of a topic", kafka, rafka, broker=False)


def test_topic_config_keys(pair: Pair) -> None:
    kafka, rafka = describe(pair, TOPIC, NAME, keys=("retention.ms", "no.such.key"))
    pair.compare("DescribeConfigs: two keys of a topic, one unknown", kafka, rafka)


def test_unknown_topic(pair: Pair) -> None:
    kafka, rafka = describe(pair, TOPIC, "compat-configs-nope")
    pair.compare("DescribeConfigs: an unknown topic", kafka, rafka)


def test_unknown_broker(pair: Pair) -> None:
    kafka, rafka = describe(pair, BROKER, "42")
    pair.compare("DescribeConfigs: an unknown broker id", kafka, rafka)


def test_invalid_broker_name(pair: Pair) -> None:
    kafka, rafka = describe(pair, BROKER, "one")
    pair.compare("DescribeConfigs: a broker name that is not a number", kafka, rafka)


def test_broker_configs(pair: Pair) -> None:
    kafka, rafka = describe(pair, BROKER, "1", synonyms=False, documentation=False)
    compare_configs(pair, "of a broker", kafka, rafka, broker=True)


def incremental(
    pair: Pair,
    case: str,
    configs: list[tuple[str, int, str | None]],
    name: str = NAME,
    validate_only: bool = False,
) -> None:
    b = builder(INCREMENTAL_ALTER_CONFIGS, 1)
    resource = b.AlterConfigsResource(
        resource_type=TOPIC,
        resource_name=name,
        configs=tuple(
            b.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in configs
        ),
    )
    pair.call(
        case, INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=validate_only
    )


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def test_incremental_alter(pair: Pair) -> None:
    incremental(pair, "IncrementalAlterConfigs: set retention.ms", [("retention.ms", SET, "1000")])
    incremental(pair, "IncrementalAlterConfigs: an unknown config", [("no.such.config", SET, "1")])
    incremental(pair, "IncrementalAlterConfigs: a bad value", [("retention.ms", SET, "x")])
    incremental(
        pair,
        "IncrementalAlterConfigs: append to cleanup.policy",
        [("cleanup.policy", APPEND, "delete")],
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: append to a non-list config",
        [("retention.ms", APPEND, "5")],
    )
    incremental(
        pair, "IncrementalAlterConfigs: delete retention.ms", [("retention.ms", DELETE, None)]
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: an unknown topic",
        [("retention.ms", SET, "1")],
        name="compat-configs-nope",
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: the same config twice",
        [("retention.ms", SET, "1"), ("retention.ms", SET, "2")],
    )
    kafka, rafka = describe(pair, TOPIC, NAME, keys=("retention.ms", "cleanup.policy"))
    pair.compare("DescribeConfigs: after the incremental changes", kafka, rafka)
