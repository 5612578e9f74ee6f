"""Errors raised by the log, each carrying the Kafka error code the broker puts in its response."""

from __future__ import annotations

from dataplane.protocol.errors import ErrorCode, KafkaError

__all__ = ["ErrorCode", "LogError", "UnexpectedAppendOffsetError"]


class LogError(KafkaError):
    """A request the log refuses; ``code`` is what the broker answers with."""


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose offsets do not continue the log: the replica fetcher must truncate
    or re-fetch (Kafka's UnexpectedAppendOffsetException; never sent to a client)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.unknown_server_error, message)
