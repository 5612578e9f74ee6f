"""BROKER_LOGGER: this broker's Python logger levels under Kafka's log4j names, read and changed
live through DescribeConfigs / IncrementalAlterConfigs (Kafka's Log4jController and
RuntimeLoggerManager). Like Kafka's, a change lasts until the broker restarts: it is not kept in
the meta service.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

ROOT = "root"  # Kafka's name of the root logger
_TRACE = 5  # Python has no TRACE; below DEBUG
_OFF = logging.CRITICAL + 10
_ALL = 1  # the lowest level that is not NOTSET ("inherit")

# Kafka's levels (LogLevelConfig.VALID_LOG_LEVELS) -> Python's
LEVELS: dict[str, int] = {
    "OFF": _OFF,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": _TRACE,
    "ALL": _ALL,
}
_NAMES = {level: name for name, level in LEVELS.items()}

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

log = logging.getLogger("rafka.config")


def level_name(level: int) -> str:
    """A Python level as the closest Kafka level at or below it."""
    return _NAMES.get(level) or next(
        (name for lvl, name in sorted(_NAMES.items(), reverse=True) if lvl <= level), "ALL"
    )


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    found = logging.root.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every logger of this process with its effective level (Log4jController.loggers)."""
    out = {ROOT: level_name(logging.getLogger().getEffectiveLevel())}
    for name, found in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(found, logging.Logger):
            out[name] = level_name(found.getEffectiveLevel())
    return out


class LoggerConfigError(Exception):
    """A change Kafka refuses: `code` is INVALID_CONFIG or INVALID_REQUEST."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate(
    ops: Sequence[tuple[str, int, str | None]], invalid_config: int, invalid_request: int
) -> None:
    """RuntimeLoggerManager.validateLogLevelConfigs over (logger, operation, level) triples."""
    for name, op, value in ops:
        if op in (SET, DELETE) and _logger(name) is None:
            raise LoggerConfigError(invalid_config, f"Logger {name} does not exist!")
        if op == SET and (value or "") not in LEVELS:
            raise LoggerConfigError(
                invalid_config,
                f"Cannot set the log level of {name} to {value} as it is not a supported log "
                f"level. Valid log levels are {', '.join(sorted(LEVELS))}",
            )
        if op == DELETE and name == ROOT:
            raise LoggerConfigError(
                invalid_request, f"Removing the log level of the {ROOT} logger is not allowed"
            )
        if op not in (SET, DELETE):
            what = _OPS.get(op, f"Unknown operation type {op}")
            raise LoggerConfigError(
                invalid_request, f"{what} operation is not allowed for the BROKER_LOGGER resource"
            )


def apply(ops: Sequence[tuple[str, int, str | None]]) -> None:
    """Set (SET) or unset (DELETE: inherit the parent's) each logger's level; `validate`d."""
    for name, op, value in ops:
        logger = _logger(name)
        if logger is None:
            continue
        if op == SET:
            logger.setLevel(LEVELS[value or ""])
            log.warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)
