"""`present(x)`: a value the test expects to be there (a decoded record, a deadline, a
consumed record's offset), typed without its None. Product and client-library functions
return `X | None` where absence is a legitimate answer; a test that knows it is not absent
says so here, and a None fails the test at that call."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    assert value is not None, "expected a value, got None"
    return value
