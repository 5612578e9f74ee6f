"""CI's short verify schedule: ``rafka verify`` itself (the typer command, in process) against
fresh 3-meta / 3-broker clusters, fixed seeds, a few rounds each; every run must end with zero
anomalies (no acknowledged write lost or moved, no duplicate of an idempotent producer, replicas
identical below the high watermark, consumers never going backwards or skipping).

- process faults on local ports: kill -9 of a partition leader, SIGSTOP of a follower past
  replica.lag.time.max.ms, kill -9 of the meta Raft leader;
- the transactional workload (transactions over several partitions, some aborted on purpose,
  read_committed readers) under kill -9 of a partition leader: no aborted or dirty read, every
  committed transaction read whole and once;
- consume-transform-produce (transformers consuming, writing and committing the consumed offsets
  in one transaction) under kill -9 of a partition leader: every committed input transformed
  exactly once, no offset committed without its writes, no G0 / G1c dependency cycle;
- the consumer group, each member a process joining, leaving or killed with kill -9, with the
  classic and the consumer (KIP-848) protocol: every record consumed, no commit ahead of what was
  processed, no partition owned by two members at once;
- network faults, each node in its own namespace (root and nftables needed, skipped otherwise):
  one node isolated from every other, and the zombie leader - a partition leader cut off from
  the meta service while clients and followers still reach it.

The rounds' availability is printed, not asserted: a loaded machine stretches it. The longer
schedule, one run per nemesis, is ``make chaos``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cluster.cli import app

_HEADLINE = re.compile(
    r"operations (\d+)  acknowledged (\d+)  lost (\d+)  duplicated (\d+) .* faults (\d+) .*"
    r"anomalies (\d+)"
)


def _verify(
    tmp_path: Path,
    nemesis: str,
    rounds: int,
    down_s: float,
    seed: int,
    workload: str = "produce",
    *more: str,
) -> str:
    args = ["verify", "--workload", workload, "--nemesis", nemesis, "--rounds", str(rounds), *more]
    args += ["--time", "300"]
    args += ["--down", str(down_s), "--quiet", "2", "--seed", str(seed)]
    result = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path)])
    print(result.output)
    assert result.exit_code == 0, result.output
    m = _HEADLINE.search(result.output)
    assert m, result.output
    operations, acked, lost, duplicated, faults, anomalies = map(int, m.groups())
    assert (lost, duplicated, anomalies) == (0, 0, 0), result.output
    assert faults == rounds, result.output
    assert operations >= acked > 500, result.output  # progress through the faults
    return result.output


@pytest.mark.timeout(240)
def test_process_faults(tmp_path: Path) -> None:
    _verify(tmp_path, "kill-leader,pause-follower,kill-meta-leader", rounds=3, down_s=3, seed=1)


@pytest.mark.timeout(180)
def test_transactions_under_kill_leader(tmp_path: Path) -> None:
    output = _verify(tmp_path, "kill-leader", rounds=2, down_s=3, seed=1, workload="txn")
    m = re.search(r"transactions \d+ \(committed (\d+), aborted (\d+)", output)
    assert m, output
    committed, aborted = map(int, m.groups())
    # both kinds, through the faults
    assert committed > 50, output
    assert aborted > 5, output


@pytest.mark.timeout(180)
def test_consume_transform_produce_under_kill_leader(tmp_path: Path) -> None:
    output = _verify(tmp_path, "kill-leader", rounds=1, down_s=3, seed=3, workload="ctp")
    m = re.search(r"consume-transform-produce: (\d+) records transformed", output)
    assert m, output
    assert int(m.group(1)) > 200, output  # the transformers kept up through the fault
    assert "cycles G0 0, G1c 0" in output, output


@pytest.mark.timeout(180)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_members_join_leave_and_are_killed(tmp_path: Path, protocol: str) -> None:
    # seed 1: the churn kills a member, two join, one leaves
    output = _verify(tmp_path, "kill-leader", 1, 3, 1, "group", "--group-protocol", protocol)
    m = re.search(r"group verify-group: \d+ members \((.*)\); consumed (\d+) of (\d+)", output)
    assert m, output
    assert "killed" in m.group(1), output
    assert "left" in m.group(1), output
    assert m.group(2) == m.group(3), output


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.mark.timeout(240)
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("ip") is None,
    reason="network faults need root, iproute2 and nftables",
)
def test_network_faults(tmp_path: Path) -> None:
    before = _namespaces()
    _verify(tmp_path, "isolate-node,zombie-leader", rounds=2, down_s=8, seed=2)
    assert _namespaces() - before == set(), "the run left network namespaces behind"
