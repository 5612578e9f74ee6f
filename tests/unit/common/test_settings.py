"""Settings precedence and the .properties parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.settings import parse_properties
from dataplane.config import BrokerConfig


def test_properties_format() -> None:
    text = (
        "# comment\n! also a comment\n\nnum.partitions=3\nlog.dirs : /data\n"
        "listeners = PLAINTEXT://a:1,\\\n  SSL://b:2\n"
    )
    assert parse_properties(text) == {
        "num.partitions": "3",
        "log.dirs": "/data",
        "listeners": "PLAINTEXT://a:1,SSL://b:2",
    }


def test_precedence_override_env_file_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=4\nlog.segment.bytes=1000\nmessage.max.bytes=2000\n")
    monkeypatch.setenv("RAFKA_LOG_SEGMENT_BYTES", "5000")
    monkeypatch.setenv("RAFKA_MESSAGE_MAX_BYTES", "6000")
    config = BrokerConfig.load(props, {"message.max.bytes": "7000"})
    assert config.num_partitions == 4  # file
    assert config.log_segment_bytes == 5000  # env beats file
    assert config.message_max_bytes == 7000  # override beats env
    assert config.default_replication_factor == 1  # default
    assert config.model_fields_set == {"num_partitions", "log_segment_bytes", "message_max_bytes"}


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown setting"):
        BrokerConfig.load(None, {"num.partitionz": "3"})


def test_kafka_names_round_trip() -> None:
    assert BrokerConfig.load(None, {}).as_properties()["auto.create.topics.enable"] == "True"
