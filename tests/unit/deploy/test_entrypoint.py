"""The image's entry point (deploy/image/entrypoint.py): what it runs, with which settings."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from common.settings import parse_properties
from dataplane.config import BrokerConfig
from meta.config import MetaConfig

PATH = Path(__file__).resolve().parents[3] / "deploy" / "image" / "entrypoint.py"
_spec = importlib.util.spec_from_file_location("rafka_entrypoint", PATH)
assert _spec is not None
assert _spec.loader is not None
ep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ep)

FQDN = "rafka-broker-2.rafka-broker-headless.ns.svc.cluster.local"


def plan(argv: list[str], env: dict[str, str], tmp_path: Path, hostname: str = "rafka-broker-2"):
    return ep.plan(argv, env, hostname, FQDN, config_dir=tmp_path)


def test_broker_in_a_statefulset_pod(tmp_path: Path) -> None:
    argv, env = plan(["broker"], {"PATH": "/bin"}, tmp_path)
    assert argv == [ep.RAFKA, "broker"]
    assert env["RAFKA_NODE_ID"] == "3"  # ordinal 2 + 1
    assert env["RAFKA_LOG_DIRS"] == "/var/lib/rafka"
    assert env["RAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{FQDN}:9092"
    assert env["RAFKA_ADVERTISED_REPLICATION_LISTENER"] == f"{FQDN}:9392"
    assert env["PATH"] == "/bin"
    # What rafka would then load:
    config = BrokerConfig(**{k[6:].lower(): v for k, v in env.items() if k.startswith("RAFKA_")})
    assert config.node_id == 3
    assert config.advertised_listeners.endswith(":9092")


def test_meta_node_defaults(tmp_path: Path) -> None:
    argv, env = plan(["meta", "--log-level", "DEBUG"], {}, tmp_path, hostname="rafka-meta-0")
    assert argv == [ep.RAFKA, "meta", "--log-level", "DEBUG"]
    assert env == {"RAFKA_NODE_ID": "1", "RAFKA_META_DATA_DIR": "/var/lib/rafka"}


def test_explicit_settings_win(tmp_path: Path) -> None:
    """The environment and the properties file are never overridden by the defaults."""
    (tmp_path / "broker.properties").write_text(
        "log.dirs=/data\nlisteners=PLAINTEXT://0.0.0.0:19092\nnode.id=7\n"
    )
    argv, env = plan(
        ["broker"], {"RAFKA_REPLICATION_LISTENER": "0.0.0.0:19392"}, tmp_path, hostname="x-4"
    )
    assert argv == [ep.RAFKA, "broker", "--config", str(tmp_path / "broker.properties")]
    assert "RAFKA_NODE_ID" not in env  # the file sets it
    assert "RAFKA_LOG_DIRS" not in env
    assert env["RAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{FQDN}:19092"
    assert env["RAFKA_ADVERTISED_REPLICATION_LISTENER"] == f"{FQDN}:19392"
    _, env = plan(["broker"], {"RAFKA_NODE_ID": "9", "RAFKA_NODE_ID_OFFSET": "100"}, tmp_path)
    assert env["RAFKA_NODE_ID"] == "9"


def test_ordinal_offset_and_placeholders(tmp_path: Path) -> None:
    _, env = plan(
        ["broker"],
        {
            "RAFKA_NODE_ID_OFFSET": "100",
            "RAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://b-{ordinal}.example.com:{ordinal+31090}",
            "RAFKA_BROKER_RACK": "rack-{node_id}",
            "OTHER": "{ordinal}",  # only RAFKA_* values are expanded
        },
        tmp_path,
    )
    assert env["RAFKA_NODE_ID"] == "102"
    assert env["RAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://b-2.example.com:31092"
    assert env["RAFKA_BROKER_RACK"] == "rack-102"
    assert env["OTHER"] == "{ordinal}"
    _, env = plan(["broker"], {"RAFKA_ORDINAL": "5"}, tmp_path, hostname="no-ordinal-here")
    assert env["RAFKA_NODE_ID"] == "6"


def test_unknown_ordinal_is_an_error_only_when_used(tmp_path: Path) -> None:
    _, env = plan(["broker"], {}, tmp_path, hostname="d78f182286b0")  # a container id
    assert "RAFKA_NODE_ID" not in env  # rafka's default (1) applies
    with pytest.raises(ValueError, match="ordinal is unknown"):
        plan(["broker"], {"RAFKA_BROKER_RACK": "r{ordinal}"}, tmp_path, hostname="abc")
    with pytest.raises(SystemExit, match="does not exist"):
        plan(["broker"], {"RAFKA_CONFIG": str(tmp_path / "missing")}, tmp_path)


def test_other_commands_run_as_they_are(tmp_path: Path) -> None:
    assert plan(["rafka", "--help"], {}, tmp_path)[0] == ["rafka", "--help"]
    assert plan([], {}, tmp_path)[0] == [ep.RAFKA, "broker"]


def test_properties_parser_matches_rafkas() -> None:
    text = "# c\n! c\na=1\nb : 2\nc= x=y\nlong=a,\\\n  b\nflag\n"
    assert ep.parse_properties(text) == parse_properties(text)


def test_env_names_match_rafkas_settings() -> None:
    for name in ("node.id", "advertised.listeners", "log.dirs", "meta.data.dir"):
        field = ep.env_name(name)[len("RAFKA_") :].lower()
        assert field in BrokerConfig.model_fields or field in MetaConfig.model_fields
