"""Errors raised by the log, each carrying the Kafka error code the broker puts in its response."""

from __future__ import annotations

import errno
import logging
import time

from dataplane.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ErrorCode",
    "LogError",
    "UnexpectedAppendOffsetError",
    "out_of_resources",
    "resource_error",
]

log = logging.getLogger("rafka.resources")

# A process or machine short of descriptors or memory: the disk is fine, and taking a log
# directory offline for it (as Kafka does with any IOException) would turn a limit into data
# unavailability, or stop the broker. The operation fails; the logs and directories stay.
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_ADVICE_EVERY_S = 10.0
_advised_at = -_ADVICE_EVERY_S


def out_of_resources(error: BaseException) -> bool:
    """Whether ``error`` says the process ran out of descriptors or memory (not a disk fault)."""
    return isinstance(error, OSError) and error.errno in _RESOURCE_ERRNOS


def resource_advice(error: OSError) -> str:
    """What a log line says to do about ``error`` (an `out_of_resources` one)."""
    if error.errno in (errno.EMFILE, errno.ENFILE):
        return (
            "the broker is out of file descriptors: raise its open-files limit (ulimit -n, "
            "LimitNOFILE= under systemd; the broker raises its soft limit to the hard limit at "
            "start) or the system's (fs.file-max), or host fewer partitions on it"
        )
    return "the broker is out of memory: give it more, or host fewer partitions on it"


def resource_error(what: str, error: OSError) -> LogError:
    """The Kafka error an operation that ran out of resources fails with, logged (at most every
    few seconds: a shortage fails many operations at once). UNKNOWN_SERVER_ERROR is Kafka's
    answer to a server-side failure it has no code for; KAFKA_STORAGE_ERROR would tell the
    client the replica's disk failed, which it did not."""
    global _advised_at
    now = time.monotonic()
    if now - _advised_at >= _ADVICE_EVERY_S:
        _advised_at = now
        log.error("%s failed: %s; %s", what, error, resource_advice(error))
    return LogError(ErrorCode.unknown_server_error, f"{what} failed: {error.strerror or error}")


class LogError(KafkaError):
    """A request the log refuses; ``code`` is what the broker answers with."""


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose offsets do not continue the log: the replica fetcher must truncate
    or re-fetch (Kafka's UnexpectedAppendOffsetException; never sent to a client)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.unknown_server_error, message)
