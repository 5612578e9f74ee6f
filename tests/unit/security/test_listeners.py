"""listeners, advertised.listeners and listener.security.protocol.map as Kafka reads them."""

from __future__ import annotations

import pytest

from dataplane.config import BrokerConfig
from dataplane.security.listeners import (
    Listener,
    ListenerConfigError,
    broker_listeners,
    parse_listeners,
    parse_protocol_map,
)

DEFAULT_MAP = parse_protocol_map(BrokerConfig.load().listener_security_protocol_map)


def test_several_listeners_each_with_its_protocol() -> None:
    listeners = parse_listeners("PLAINTEXT://:9092,sasl_ssl://0.0.0.0:9093", DEFAULT_MAP, "x")
    assert listeners == [
        Listener("PLAINTEXT", "", 9092, "PLAINTEXT"),
        Listener("SASL_SSL", "0.0.0.0", 9093, "SASL_SSL"),
    ]
    assert [(lst.tls, lst.sasl) for lst in listeners] == [(False, False), (True, True)]


def test_custom_names_come_from_the_protocol_map() -> None:
    protocols = parse_protocol_map("INTERNAL:SASL_PLAINTEXT, external:ssl")
    assert protocols == {"INTERNAL": "SASL_PLAINTEXT", "EXTERNAL": "SSL"}
    listeners = parse_listeners(
        "INTERNAL://[::1]:9092,EXTERNAL://kafka.example:9093", protocols, "x"
    )
    assert listeners[0] == Listener("INTERNAL", "::1", 9092, "SASL_PLAINTEXT")
    assert listeners[1] == Listener("EXTERNAL", "kafka.example", 9093, "SSL")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("INTERNAL://:9092", "add INTERNAL:<protocol> to listener.security.protocol.map"),
        ("PLAINTEXT://:9092,PLAINTEXT://:9093", "appears twice"),
        ("localhost:9092", "is not NAME://host:port"),
        ("PLAINTEXT://:99999", "out of range"),
        ("", "is empty"),
    ],
)
def test_bad_listeners_say_what_to_fix(text: str, message: str) -> None:
    with pytest.raises(ListenerConfigError, match=message):
        parse_listeners(text, DEFAULT_MAP, "listeners")


@pytest.mark.parametrize(
    ("text", "message"),
    [("A:TLS", "unknown security protocol"), ("A", "NAME:PROTOCOL"), ("A:SSL,a:SSL", "twice")],
)
def test_bad_protocol_maps(text: str, message: str) -> None:
    with pytest.raises(ListenerConfigError, match=message):
        parse_protocol_map(text)


def _config(**values: str) -> BrokerConfig:
    return BrokerConfig.load(None, values)


def test_advertised_defaults_to_listeners_and_the_wildcard_becomes_loopback() -> None:
    result = broker_listeners(_config(listeners="PLAINTEXT://0.0.0.0:9092,SSL://:9093"))
    assert [lst.host for lst in result.bound] == ["0.0.0.0", ""]
    assert result.advertised == [
        Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        Listener("SSL", "127.0.0.1", 9093, "SSL"),
    ]


def test_advertised_listeners_may_name_other_hosts_and_leave_listeners_out() -> None:
    result = broker_listeners(
        _config(
            listeners="PLAINTEXT://:9092,SSL://:9093",
            **{"advertised.listeners": "SSL://kafka-1.example:19093"},
        )
    )
    assert len(result.bound) == 2
    assert result.advertised == [Listener("SSL", "kafka-1.example", 19093, "SSL")]


def test_an_advertised_listener_must_be_bound() -> None:
    with pytest.raises(ListenerConfigError, match="OTHER is not in listeners"):
        broker_listeners(
            _config(
                listeners="PLAINTEXT://:9092",
                **{
                    "advertised.listeners": "OTHER://h:1",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:SSL",
                },
            )
        )


def test_each_listener_needs_its_own_port() -> None:
    with pytest.raises(ListenerConfigError, match="its own port"):
        broker_listeners(_config(listeners="PLAINTEXT://:9092,SSL://:9092"))
