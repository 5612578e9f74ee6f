"""The broker's collector tuning: frozen objects leave the collector's walks, and a refreeze
still reclaims cyclic garbage that was frozen before (no leak of removed partitions)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from dataplane import gc_tuning


class Node:
    """Part of a reference cycle, as a removed partition's objects may be."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_thresholds_are_raised() -> None:
    gc_tuning.tune_collector()
    assert gc.get_threshold() == (
        gc_tuning.GEN0_THRESHOLD,
        gc_tuning.GEN1_THRESHOLD,
        gc_tuning.GEN2_THRESHOLD,
    )


def test_refreeze_reclaims_cycles_frozen_earlier() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc_tuning.refreeze()
    assert gc.get_freeze_count() > 0
    del a, b
    gc.collect()
    assert gone() is not None, "a frozen cycle is out of the collector's reach"
    gc_tuning.refreeze()
    assert gone() is None, "the refreeze did not reclaim the cycle"
