"""The README's "Kafka APIs" section names exactly the APIs the handlers serve."""

from __future__ import annotations

import re
from pathlib import Path

from dataplane.handlers import HANDLERS

README = Path(__file__).parents[3] / "README.md"


def test_readme_lists_the_served_apis() -> None:
    section = README.read_text().split("\n## Kafka APIs\n", 1)[1].split("\n## ", 1)[0]
    served, not_served = section.split("\nNot served yet", 1)
    assert {int(k) for k in re.findall(r"\((\d+)\)", served)} == set(HANDLERS)
    assert not {int(k) for k in re.findall(r"\b(\d+)\b", not_served)} & set(HANDLERS)
