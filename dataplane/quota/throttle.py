"""Throttling a client that exceeded a quota (KIP-219), for the handlers and the server.

The response goes out at once with ``throttle_time_ms``; then the connection is *muted*: the
server's reader takes no further request from it until the throttle time has passed
(``wait_unmuted``). The client's next requests wait in its own socket buffer, so the broker
holds nothing more for a throttled client than one frame it has started reading. Each
throttle is counted in the throttle-time metrics of its quota type.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import struct
import time
from typing import Any

import anyio

from dataplane.connection import Connection
from dataplane.metrics import quotas as quota_metrics
from dataplane.protocol.encoders import produce_throttle_position
from dataplane.request_context import RequestContext

# Kafka's Errors.THROTTLING_QUOTA_EXCEEDED message, the error message of a refused mutation.
THROTTLED = "The throttling quota has been exceeded."

# Responses handlers return encoded (bytes) that open with throttle_time_ms, from a version:
# Metadata and Fetch. (Produce's comes after its topics: produce_throttle_position.)
_THROTTLE_FIRST_SINCE = {3: 3, 1: 1}  # API key: the first version with the field first
_PRODUCE = 0
_INT32 = struct.Struct(">i")

# ClientRequestQuotaManager.NanosToPercentagePerSecond: a handler busy for one second is 100
# (percent of one thread) recorded against request_percentage.
_NANOS_TO_PERCENTAGE = 100.0 / 1e9


def user_of(conn: Connection) -> str:
    """The principal's name, as Kafka's quota entities name users ("User:alice" -> "alice";
    unauthenticated clients are ANONYMOUS)."""
    return conn.principal.partition(":")[2]


def mute(conn: Connection, throttle_ms: float) -> None:
    """Read no request from ``conn`` for ``throttle_ms`` (a longer mute already set stays)."""
    until = time.monotonic() + throttle_ms / 1000.0
    if until > conn.muted_until:
        conn.muted_until = until


async def wait_unmuted(conn: Connection) -> None:
    """Sleep out the connection's mute (the server's reader calls this before each read)."""
    while (delay := conn.muted_until - time.monotonic()) > 0:
        await anyio.sleep(delay)
    conn.muted_until = 0.0


def throttle(ctx: RequestContext, throttle_ms: float, quota_type: str) -> None:
    """Throttle the request's client: its response says ``throttle_ms`` (the largest of the
    request's throttles) and its connection is muted for that long."""
    if throttle_ms <= 0:
        return
    quota_metrics.throttled(quota_type, throttle_ms)
    if throttle_ms > ctx.throttle_ms:
        ctx.throttle_ms = throttle_ms
    mute(ctx.conn, throttle_ms)


def produce(ctx: RequestContext) -> int:
    """Record the produce request's bytes against producer_byte_rate (call only when
    ``quotas.produce.enabled``); the throttle time it earns."""
    ms = ctx.services.quotas.produce.record(user_of(ctx.conn), ctx.header.client_id or "", ctx.size)
    throttle(ctx, ms, "produce")
    return ms


def fetch_budget(ctx: RequestContext, max_bytes: int) -> int:
    """The bytes a Fetch or ShareFetch may answer (Kafka's fetchMaxBytes): the request's
    ``max_bytes``, at most the broker's fetch.max.bytes and, under consumer_byte_rate, what one
    quota window allows (Kafka's getMaxValueInQuotaWindow)."""
    budget: int = min(max_bytes, ctx.services.config.fetch_max_bytes)
    fetch_quotas = ctx.services.quotas.fetch
    if fetch_quotas.enabled:
        allowed = fetch_quotas.max_value_in_window(user_of(ctx.conn), ctx.header.client_id or "")
        budget = int(min(budget, allowed))
    return budget


def fetch(ctx: RequestContext, response_bytes: int) -> int:
    """Record a fetch response's bytes against consumer_byte_rate (call only when
    ``quotas.fetch.enabled``); the throttle time. A throttled fetch answers no data, so its
    bytes are taken back (Kafka's unrecordQuotaSensor)."""
    fetch_quotas = ctx.services.quotas.fetch
    user, client_id = user_of(ctx.conn), ctx.header.client_id or ""
    ms = fetch_quotas.record(user, client_id, response_bytes)
    if ms > 0:
        fetch_quotas.unrecord(user, client_id, response_bytes)
        throttle(ctx, ms, "fetch")
    return ms


def request_time(ctx: RequestContext, handler_nanos: int) -> None:
    """Record the handler's time against request_percentage (call only when
    ``quotas.request.enabled``) and throttle the client if it is over."""
    ms = ctx.services.quotas.request.record(
        user_of(ctx.conn), ctx.header.client_id or "", handler_nanos * _NANOS_TO_PERCENTAGE
    )
    throttle(ctx, ms, "request")


def mutations(ctx: RequestContext, partitions: int, strict_since: int) -> bool:
    """Spend ``partitions`` mutations of controller_mutation_rate (KIP-599) for one topic of
    a CreateTopics, CreatePartitions or DeleteTopics request. False: refused, answer
    THROTTLING_QUOTA_EXCEEDED (versions from ``strict_since``); older versions are only
    throttled. The request's throttle time is set either way."""
    strict = ctx.header.api_version >= strict_since
    accepted, ms = ctx.services.quotas.mutation.record(
        user_of(ctx.conn), ctx.header.client_id or "", partitions, strict
    )
    throttle(ctx, ms, "controller_mutation")
    return accepted


def with_throttle_time(result: Any, throttle_ms: float, api_key: int, version: int) -> Any:
    """The response carrying the throttle time (the larger of its own and ``throttle_ms``):
    a kio response, or an encoded Produce, Metadata or Fetch body (a request_percentage
    throttle is known only once the handler has run); other encoded bodies and deferred
    answers are returned as they are (their handlers set it: a deferred Produce answer reads
    the request's throttle when it is encoded)."""
    if isinstance(result, bytes):
        if api_key == _PRODUCE:
            position = produce_throttle_position(version, result)
        else:
            since = _THROTTLE_FIRST_SINCE.get(api_key)
            if since is None or version < since:
                return result
            position = 0
        if _INT32.unpack_from(result, position)[0] >= throttle_ms:
            return result
        return result[:position] + _INT32.pack(int(throttle_ms)) + result[position + 4 :]
    if isinstance(result, list) or inspect.isawaitable(result):
        return result
    current = getattr(result, "throttle_time", None)
    if not isinstance(current, datetime.timedelta):
        return result  # a response without the field (or an int set by hand)
    wanted = datetime.timedelta(milliseconds=throttle_ms)
    if current >= wanted:
        return result
    return dataclasses.replace(result, throttle_time=wanted)
