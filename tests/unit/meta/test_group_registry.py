"""The meta service's group registry: idempotent registration and removal, and old state
dumps (from before the registry existed) still load."""

from __future__ import annotations

import pickle

from meta.commands import RegisterGroups, UnregisterGroups
from meta.state import MetaState

from .machine import Machine


def test_register_and_unregister_groups() -> None:
    machine = Machine()
    assert machine.run(RegisterGroups((("a", 3), ("b", 7)))) == 2
    assert machine.run(RegisterGroups((("a", 3), ("c", 1)))) == 1  # "a" again is no change
    assert machine.state.groups == {"a": 3, "b": 7, "c": 1}
    assert machine.run(UnregisterGroups(("a", "zzz"))) == 1
    assert machine.state.groups == {"b": 7, "c": 1}
    # brokers do not watch the registry: no metadata offset is spent on it
    assert machine.state.offset == 0
    assert machine.changes == []


def test_a_retried_registration_is_applied_once() -> None:
    machine = Machine()
    assert machine.run(RegisterGroups((("a", 0),)), request_id="r1") == 1
    machine.run(UnregisterGroups(("a",)))
    assert machine.run(RegisterGroups((("a", 0),)), request_id="r1") == 1  # remembered result
    assert machine.state.groups == {}


def test_a_state_dumped_before_the_registry_loads_with_an_empty_one() -> None:
    old = MetaState(cluster_id="c")
    del old.__dict__["groups"]  # as pickled by a version without the field
    restored = pickle.loads(pickle.dumps(old))
    assert restored.groups == {}
    assert restored.cluster_id == "c"
