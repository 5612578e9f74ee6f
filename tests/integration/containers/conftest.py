"""Docker for the container tests: the ``containers`` marker, the engine check, the image.

``pytest -m containers`` runs only these; ``-m "not containers"`` skips them. Without a Docker
engine they are skipped with the reason (what is missing and how to get it), except under CI
(``CI`` set), where they must run and fail instead. The session builds the image first with
deploy/image/build.sh (cached: seconds when nothing changed), so the containers run this
checkout's code; ``RAFKA_TEST_IMAGE=<image>`` uses a ready image and skips the build.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

# No registry here: Ryuk (testcontainers' reaper) cannot be pulled. The fixtures clean up.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

REPO = Path(__file__).resolve().parents[3]
BUILD = REPO / "deploy" / "image" / "build.sh"
SOCKET = Path("/var/run/docker.sock")
_summaries: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "containers: multi-node failover tests in Docker containers "
        "(tests/integration/containers; need a Docker engine and the rafka image)",
    )


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _summaries:
        terminalreporter.section("container failover figures")
        for line in _summaries:
            terminalreporter.write_line(line)


def _unavailable(reason: str) -> None:
    """Skip with the reason; under CI, fail: there the tests must run."""
    if os.environ.get("CI"):
        pytest.fail(f"container tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"container tests skipped: {reason}")


def docker_problem() -> str | None:
    """None if a Docker engine answers; else what is missing, and how to fix it."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host and not SOCKET.exists():
        return (
            f"no Docker engine: {SOCKET} does not exist (install Debian's docker.io and start "
            "dockerd, as .ci/run does: apt-get install -y docker.io; dockerd &)"
        )
    import docker

    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as e:
        return f"the Docker engine at {host or SOCKET} does not answer ({e}); is dockerd running?"
    return None


@pytest.fixture(scope="session")
def rafka_image() -> str:
    """The image to run (built from this checkout unless RAFKA_TEST_IMAGE names one)."""
    if problem := docker_problem():
        _unavailable(problem)
    from tests.integration.containers.cluster import IMAGE, remove_leftovers

    remove_leftovers()
    if os.environ.get("RAFKA_TEST_IMAGE"):
        return IMAGE
    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=900)
    if proc.returncode:
        _unavailable(f"deploy/image/build.sh failed (exit {proc.returncode}):\n{proc.stderr}")
    return IMAGE


@pytest.fixture
def failover_summary() -> Iterator[list[str]]:
    """Lines appended here are printed in the session's terminal summary."""
    lines: list[str] = []
    yield lines
    _summaries.extend(lines)
