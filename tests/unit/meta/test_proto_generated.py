"""The committed protobuf modules match proto/*.proto (regenerate: python -m proto.generate)."""

from __future__ import annotations

from pathlib import Path

from proto.generate import REPO_ROOT, generate


def test_generated_modules_are_up_to_date(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert written
    for fresh in written:
        committed = REPO_ROOT / fresh.relative_to(tmp_path)
        assert committed.read_text() == fresh.read_text(), (
            f"{committed.name} is stale: run `python -m proto.generate`"
        )
