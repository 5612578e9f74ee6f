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
    version: int = 4,
) -> tuple[Any, Any]:
    b = builder(DESCRIBE_CONFIGS, version)
    return pair.send(
        DESCRIBE_CONFIGS,
        version,
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
                if kc[field] != rc[field]
                and not (broker and name in _BROKER_LOCAL and field in _LOCAL_FIELDS)
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
# addresses and directories, and the listener map (Kafka's names its controller listener).
# Their value and where it comes from are not compared (Kafka's fixture names its advertised
# listener, Rafka's need not); their type and flags are.
_BROKER_LOCAL = frozenset(
    ("listeners", "advertised.listeners", "log.dirs", "listener.security.protocol.map")
)
_LOCAL_FIELDS = frozenset(("value", "config_source"))


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


@pytest.mark.parametrize("version", [1, 2, 3])
def test_topic_config_keys_older_versions(pair: Pair, version: int) -> None:
    kafka, rafka = describe(
        pair, TOPIC, NAME, keys=("retention.ms", "segment.ms", "cleanup.policy"), version=version
    )
    pair.compare(f"DescribeConfigs v{version}: three keys of a topic", kafka, rafka)


@pytest.mark.parametrize(("what", "name"), [("an invalid name", "bad name!"), ("no name", "")])
def test_topic_with_a_bad_name(pair: Pair, what: str, name: str) -> None:
    kafka, rafka = describe(pair, TOPIC, name)
    pair.compare(f"DescribeConfigs: a topic with {what}", kafka, rafka)


def test_cluster_default_configs(pair: Pair) -> None:
    kafka, rafka = describe(pair, BROKER, "")
    pair.compare("DescribeConfigs of the cluster-wide broker defaults", kafka, rafka)


def test_broker_config_keys(pair: Pair) -> None:
    kafka, rafka = describe(
        pair, BROKER, "1", keys=("log.retention.ms", "log.retention.hours", "log.roll.jitter.ms")
    )
    pair.compare("DescribeConfigs: broker keys with synonyms in other units", kafka, rafka)


def test_broker_configs(pair: Pair) -> None:
    kafka, rafka = describe(pair, BROKER, "1", synonyms=False, documentation=False)
    compare_configs(pair, "of a broker", kafka, rafka, broker=True)


def incremental(
    pair: Pair,
    case: str,
    configs: list[tuple[str, int, str | None]],
    name: str = NAME,
    validate_only: bool = False,
    resource_type: int = TOPIC,
) -> None:
    b = builder(INCREMENTAL_ALTER_CONFIGS, 1)
    resource = b.AlterConfigsResource(
        resource_type=resource_type,
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


def test_incremental_alter_more(pair: Pair) -> None:
    incremental(
        pair,
        "IncrementalAlterConfigs: validate_only",
        [("retention.ms", SET, "5000")],
        validate_only=True,
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: subtract from cleanup.policy",
        [("cleanup.policy", SUBTRACT, "compact")],
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: a config Kafka 4 removed",
        [("message.timestamp.difference.max.ms", SET, "1000")],
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: an unknown operation",
        [("retention.ms", 7, "1000")],
    )
    incremental(
        pair,
        "IncrementalAlterConfigs: a topic with an invalid name",
        [("retention.ms", SET, "1000")],
        name="bad name!",
    )
    kafka, rafka = describe(pair, TOPIC, NAME, keys=("retention.ms", "cleanup.policy"))
    pair.compare("DescribeConfigs: after validate_only and subtract", kafka, rafka)


@pytest.mark.parametrize(
    ("what", "name", "configs"),
    [
        ("a dynamic setting (validate_only)", "1", [("message.max.bytes", SET, "2000000")]),
        ("a read-only setting", "1", [("log.dirs", SET, "/tmp/elsewhere")]),
        ("an unknown setting", "1", [("no.such.setting", SET, "1")]),
        ("a bad value", "1", [("message.max.bytes", SET, "big")]),
        ("another broker", "42", [("message.max.bytes", SET, "2000000")]),
        ("the cluster default (validate_only)", "", [("log.retention.ms", SET, "1000")]),
    ],
)
def test_incremental_alter_broker(
    pair: Pair, what: str, name: str, configs: list[tuple[str, int, str | None]]
) -> None:
    incremental(
        pair,
        f"IncrementalAlterConfigs of a broker: {what}",
        configs,
        name=name,
        validate_only=True,
        resource_type=BROKER,
    )


def test_alter_configs(pair: Pair) -> None:
    """AlterConfigs (the older API) replaces a resource's whole config set."""
    b = builder(ALTER_CONFIGS, 2)

    def alter(case: str, name: str, configs: dict[str, str | None], validate: bool) -> None:
        resource = b.AlterConfigsResource(
            resource_type=TOPIC,
            resource_name=name,
            configs=tuple(b.AlterableConfig(name=k, value=v) for k, v in configs.items()),
        )
        pair.call(case, ALTER_CONFIGS, 2, resources=(resource,), validate_only=validate)

    alter("AlterConfigs: validate_only", NAME, {"retention.ms": "777"}, True)
    alter("AlterConfigs: an unknown topic", "compat-configs-nope", {"retention.ms": "1"}, True)
    alter("AlterConfigs: a bad value", NAME, {"segment.ms": "0"}, True)
    alter("AlterConfigs: an unknown config", NAME, {"no.such.config": "1"}, True)
    alter("AlterConfigs: a null value", NAME, {"retention.ms": None}, True)
    alter("AlterConfigs: replace the set", NAME, {"segment.ms": "100000"}, False)
    kafka, rafka = describe(pair, TOPIC, NAME, keys=("retention.ms", "segment.ms"))
    pair.compare("DescribeConfigs: after AlterConfigs replaced the set", kafka, rafka)
