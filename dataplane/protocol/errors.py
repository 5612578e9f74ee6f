"""Kafka error codes (kio's ErrorCode enum) and the exception handlers raise to return one.

Codes Kafka added after kio 0.6.5's enum are registered into that enum here, at import (the
codec imports this module), so kio reads and writes them like its own: a client of ours reads
Apache Kafka's answer with one, and handlers answer with one.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["CONTROLLER_ID_NOT_REGISTERED", "ErrorCode", "KafkaError"]


def _register(value: int, name: str, retriable: bool) -> ErrorCode:
    """`ErrorCode(value)` from now on: a member added to kio's enum (Python's enum has no public
    way to extend one, hence its member maps), or the one kio already has."""
    if value in ErrorCode._value2member_map_:
        return ErrorCode(value)
    member = int.__new__(ErrorCode, value)
    member._value_ = value
    member._name_ = name
    member.retriable = retriable
    member.__objclass__ = ErrorCode  # type: ignore[attr-defined]
    ErrorCode._value2member_map_[value] = member
    ErrorCode._member_map_[name] = member
    ErrorCode._member_names_.append(name)
    return member


# KIP-1312 (Kafka 4.4): UnregisterController of an id no controller has registered.
CONTROLLER_ID_NOT_REGISTERED = _register(136, "controller_id_not_registered", retriable=False)


class KafkaError(Exception):
    """A request-level or partition-level failure that maps to a Kafka error code."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)


class ConnectionClosed(Exception):
    """Close this connection (Kafka's answer to unparseable input and failed acks=0 produce)."""
