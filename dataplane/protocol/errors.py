"""Kafka error codes (kio's ErrorCode enum) and the exception handlers raise to return one."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["DEFAULT_MESSAGES", "ErrorCode", "KafkaError"]

# Kafka's default message of an error (Errors.X.message()), which its answers carry where they
# build the error bare (`new ApiError(Errors.X)`).
DEFAULT_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
}


class KafkaError(Exception):
    """A request-level or partition-level failure that maps to a Kafka error code."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)


class ConnectionClosed(Exception):
    """Close this connection (Kafka's answer to unparseable input and failed acks=0 produce)."""
