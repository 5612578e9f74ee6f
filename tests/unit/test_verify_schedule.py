"""rafka verify's pure pieces: schedules, partitions as cuts, the verdict's one-line headline and
table, the CLI's argument checks (no cluster: the runs are tests/integration/test_verify.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cluster.cli import app
from cluster.verify.checker.produce import Report
from cluster.verify.netns import between
from cluster.verify.run import build_config, headline, table
from cluster.verify.schedule import Schedule, needs_namespaces


def test_schedule_checks_its_faults() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        Schedule(kinds=("kill-leader", "unplug"))
    with pytest.raises(ValueError, match="rounds or a duration"):
        Schedule(rounds=0, duration_s=0)
    s = Schedule(kinds=("pause-follower", "zombie-leader"))
    # A pause must not outlast broker.session.timeout.ms (6 s); a cut must.
    assert s.down_for("pause-follower") == 4.0
    assert s.down_for("zombie-leader") == 10.0
    assert Schedule(down_s=2.5).down_for("zombie-leader") == 2.5


def test_which_faults_need_namespaces() -> None:
    assert not needs_namespaces(("kill-leader", "pause-follower", "kill-meta-leader"))
    assert needs_namespaces(("kill-leader", "isolate-node"))
    assert needs_namespaces(("disk-full",))


def test_cuts_between_sides() -> None:
    assert sorted(between(["a"], ["b", "c"])) == [("a", "b"), ("a", "c"), ("b", "a"), ("c", "a")]
    assert between(["a"], ["b"], one_way=True) == [("a", "b")]
    assert between(["a", "b"], ["b"]) == [("a", "b"), ("b", "a")]  # never a node from itself


def test_build_config() -> None:
    cfg = build_config(("kill-leader",), rounds=2, replication_factor=1, min_insync_replicas=1)
    assert cfg.workload.idempotent_py
    assert not cfg.workload.plain_py
    assert not cfg.schedule.full_isr
    assert "replica.lag.time.max.ms" not in cfg.overrides
    cfg = build_config(("kill-leader",), producers=("plain",), overrides={"a.b": "1"})
    assert cfg.overrides["replica.lag.time.max.ms"] == "2000"
    assert cfg.overrides["a.b"] == "1"
    with pytest.raises(ValueError, match="producers"):
        build_config(("kill-leader",), producers=("java",))


def test_headline_and_table() -> None:
    ok = Report(figures={"attempted": 10, "acknowledged": 9, "lost": 0, "duplicated": 0})
    ok.figures |= {"faults": ["kill-leader"], "fault_ack_gaps_s": [1.5, 0.2], "seconds": 90}
    bad = Report(failures=["1 acknowledged records lost: ('p 1', 0, 1, None)"])
    assert "operations 10  acknowledged 9  lost 0" in headline(ok)
    assert headline(ok).endswith("longest ack gap during a fault 1.5s  anomalies 0")
    assert headline(bad).endswith("anomalies 1")
    rows = table([("kill-leader", ok), ("isolate-node", bad)]).splitlines()
    assert rows[2] == "| kill-leader | 1.5 | 1 | 10 | 9 | 0 | 0 | 1.5s | 0 |"
    assert rows[3].startswith("| isolate-node | 0.0 | 0 |")
    assert rows[3].endswith("| 1 |")


def test_cli_rejects_bad_arguments() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["verify", "--nemesis", "unplug", "--rounds", "1"])
    assert result.exit_code == 2
    assert "unknown fault" in result.output
    result = runner.invoke(app, ["verify", "--workload", "bank"])
    assert result.exit_code == 2
    assert "unknown workload" in result.output
