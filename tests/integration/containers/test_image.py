"""The image itself (deploy/image/): tags, non-root user, data volume, entry point."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.containers

REPO = Path(__file__).resolve().parents[3]


def test_image_contract(rafka_image: str) -> None:
    import docker

    client = docker.from_env()
    try:
        image = client.images.get(rafka_image)
        version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
        assert f"rafka:{version}" in image.tags, image.tags
        assert "rafka:dev" in image.tags, image.tags
        cfg = image.attrs["Config"]
        assert cfg["User"] == "10001:10001"
        assert "/var/lib/rafka" in cfg["Volumes"]
        assert {"9092/tcp", "9192/tcp", "9292/tcp", "9392/tcp"} <= set(cfg["ExposedPorts"])
        assert cfg["Entrypoint"][-1] == "/opt/rafka/bin/rafka-entrypoint"
        assert cfg["Labels"]["org.opencontainers.image.version"] == version

        def run(*command: str, **kwargs: object) -> str:
            c = client.containers.run(rafka_image, list(command), detach=True, **kwargs)
            try:
                assert c.wait(timeout=60)["StatusCode"] == 0, c.logs().decode()
                return c.logs(stderr=False).decode()
            finally:
                c.remove(force=True, v=True)  # v: also its anonymous /var/lib/rafka volume

        assert run("id", "-u") == "10001\n"
        assert "rafka [OPTIONS] COMMAND" in run("rafka", "--help")
        # The data directory belongs to the rafka user (a fresh volume inherits it).
        assert run("stat", "-c", "%u %a", "/var/lib/rafka").split() == ["10001", "750"]
        # Runs with a read-only root filesystem (only the volume and /tmp written).
        assert "rafka [OPTIONS]" in run("rafka", "--help", read_only=True, tmpfs={"/tmp": ""})
    finally:
        client.close()
