"""Multi-node failover in containers: 3 meta + 3 broker containers of the rafka image on a
Docker network, idempotent acks=all producers and a consumer on the host (through the
published ports) running throughout, one fault per test, then the chaos checker's verdict:
no acknowledged write lost, no duplicates, one record per offset (clients and every replica's
log), consumers' offsets monotonic. Each test prints its figures (``-s``, and in the terminal
summary): records acknowledged / read / lost / duplicated, the unavailability window (longest
gap between acks on the partitions the fault hit) and the scenario's own facts.

Select with ``-m containers``. The run directory (tmp_path) keeps the volumes, every
container's log, ``history.jsonl`` and ``report.txt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.containers

# The scenarios' names; scenarios.FAULTS maps each to its fault (imported in the test: the
# module needs testcontainers, which the rafka_image fixture installs if missing).
SCENARIOS = [
    "kill-leader",
    "pause-leader",
    "isolate-leader",
    "kill-meta-leader",
    "rolling-restart",
    "full-restart",
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_failover(
    scenario: str, rafka_image: str, tmp_path: Path, failover_summary: list[str]
) -> None:
    from tests.integration.containers.scenarios import FAULTS, run_scenario

    assert set(FAULTS) == set(SCENARIOS)
    outcome = run_scenario(tmp_path, scenario)
    failover_summary.append(outcome.summary())
    report, checks = outcome.report, outcome.checks
    figures: dict[str, Any] = report.figures  # of several types: counts, fault lists
    assert report.ok, report.text()
    assert figures["acknowledged"] >= 1000, report.text()
    assert figures["lost"] == 0, report.text()
    assert figures["duplicated"] == 0, report.text()
    assert checks["recovered"], f"the cluster was not whole again after {scenario}: {checks}"
    if scenario in ("pause-leader", "isolate-leader"):
        # The fault must have lasted long enough for the meta service to move leadership.
        assert checks["failover_s"] is not None, f"no failover during {scenario}: {checks}"
    if scenario == "isolate-leader":
        assert checks["isolated_reachable_by_clients"], (
            "the isolated broker was not reachable by clients: the scenario tested nothing"
        )
        assert checks["sent_to_it_while_cut_off"] > 0, checks
