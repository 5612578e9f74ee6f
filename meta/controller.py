"""No code: the controller's decisions live in ``meta.topic_planning`` (validation, placement),
``meta.partition_leadership`` (leader election, ISR changes, reassignment) and ``meta.features``.

The format before ``meta.records`` (log entries and dumps of pickled objects, still read: see
``meta.records``) names the classes below ``meta.controller.<name>``, after their module then:
unpickling finds them here while that format is read. Code imports them from their modules, and
type checkers do not see them here.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from meta import partition_leadership, topic_planning

PICKLED_CLASSES: dict[str, ModuleType] = {
    "NewTopic": topic_planning,
    "Rejection": topic_planning,
    "IsrChange": partition_leadership,
    "ElectionType": partition_leadership,
}

if not TYPE_CHECKING:

    def __getattr__(name: str) -> type:
        if name in PICKLED_CLASSES:
            return getattr(PICKLED_CLASSES[name], name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
