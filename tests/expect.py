"""`present(x)`: a value the test expects to be there (a decoded record, a deadline, a
group), typed without its None. Product functions return `X | None` where absence is a
legitimate answer; a test that knows it is not absent says so here, and a None fails the
test at that call, naming what was missing."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None, what: str = "a value") -> T:
    assert value is not None, f"expected {what}, got None"
    return value
