"""Waiting for a state by polling it with a deadline (tests and benches never sleep to wait)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None],
    timeout: float = 30,
    what: str = "condition",
    interval: float = 0.05,
) -> T:
    """Poll `check` every `interval` seconds until it returns something truthy, and return
    that; fail after `timeout` seconds naming `what` (tests wait for a state this way, never by
    sleeping)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)
