"""Kafka error codes (kio's ErrorCode enum) and the exception handlers raise to return one."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError"]


class KafkaError(Exception):
    """A request-level or partition-level failure that maps to a Kafka error code."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)


class ConnectionClosed(Exception):
    """Close this connection (Kafka's answer to unparseable input and failed acks=0 produce)."""
