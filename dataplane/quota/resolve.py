"""Which quota applies to a (user, client-id) pair: Kafka's DefaultQuotaCallback.

Eight levels, most specific first (ClientQuotaManager's documentation):

1. user and client-id     2. user and default client-id     3. user
4. default user and client-id     5. default user and default client-id     6. default user
7. client-id     8. default client-id

The first level with a quota of the type decides the *metric tags* (user, client-id), which
name the sensor the client shares with every other client of the same tags: under a user quota
all of the user's clients share one rate, under ``<default>`` client-id each client id has its
own. ``limit`` then reads the quota of the tags, as Kafka's quotaLimit does.
"""

from __future__ import annotations

from collections.abc import Mapping

from meta.quotas import CLIENT_ID, USER, QuotaEntity

Tags = tuple[str, str]
"""(user, client-id) of a quota sensor; "" where the quota does not depend on it."""

_ANY = object()


def _entity(user: object, client_id: object) -> QuotaEntity:
    """The entity of a level: a name, None (the default entity) or _ANY (no such component)."""
    parts: list[tuple[str, str | None]] = []
    if client_id is not _ANY:
        parts.append((CLIENT_ID, client_id))  # type: ignore[arg-type]
    if user is not _ANY:
        parts.append((USER, user))  # type: ignore[arg-type]
    return tuple(parts)


def metric_tags(quotas: Mapping[QuotaEntity, float], user: str, client_id: str) -> Tags:
    """The tags of the sensor of ``user`` (the principal's name) and ``client_id`` under the
    quotas of one type (entity -> value)."""
    levels: tuple[tuple[object, object, Tags], ...] = (
        (user, client_id, (user, client_id)),
        (user, None, (user, client_id)),
        (user, _ANY, (user, "")),
        (None, client_id, (user, client_id)),
        (None, None, (user, client_id)),
        (None, _ANY, (user, "")),
        (_ANY, client_id, ("", client_id)),
        (_ANY, None, ("", client_id)),
    )
    for level_user, level_client, tags in levels:
        if _entity(level_user, level_client) in quotas:
            return tags
    return ("", "")


def limit(quotas: Mapping[QuotaEntity, float], tags: Tags) -> float | None:
    """The quota of the sensor with ``tags`` (None: unlimited)."""
    user, client_id = tags
    candidates: tuple[QuotaEntity, ...]
    if user and client_id:
        candidates = (
            _entity(user, client_id),
            _entity(user, None),
            _entity(None, client_id),
            _entity(None, None),
        )
    elif user:
        candidates = (_entity(user, _ANY), _entity(None, _ANY))
    elif client_id:
        candidates = (_entity(_ANY, client_id), _entity(_ANY, None))
    else:
        return None
    for entity in candidates:
        value = quotas.get(entity)
        if value is not None:
            return value
    return None


def by_key(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str) -> dict[QuotaEntity, float]:
    """The user / client-id quotas of one key (IP entities hold other keys)."""
    return {entity: values[key] for entity, values in quotas.items() if key in values}
