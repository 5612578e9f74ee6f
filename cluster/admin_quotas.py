"""Client quotas over the Kafka protocol, as `rafka quotas` and kafka-configs.sh (--entity-type
users / clients / ips) read and change them: DescribeClientQuotas (48), AlterClientQuotas (49)."""

from __future__ import annotations

from dataclasses import dataclass

from cluster.admin import AdminError, Brokers, check, refusal
from cluster.kafka_client import builder

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
"""(entity type, name) components; a None name is the default entity (Kafka's <default>)."""


@dataclass
class QuotaEntry:
    entity: Entity
    values: dict[str, float]


def describe_quotas(
    brokers: Brokers, entity: Entity, strict: bool = False, any_of: tuple[str, ...] = ()
) -> list[QuotaEntry]:
    """The quotas of the entities matching `entity` (exact names, None: the default entity)
    and having some entity of each type in `any_of`; `strict`: no other components."""
    b = builder(DESCRIBE_CLIENT_QUOTAS, 1)
    components = tuple(
        b.ComponentData(
            entity_type=kind,
            match_type=MATCH_DEFAULT if name is None else MATCH_EXACT,
            match=name,
        )
        for kind, name in entity
    ) + tuple(
        b.ComponentData(entity_type=k, match_type=MATCH_SPECIFIED, match=None) for k in any_of
    )
    with brokers.any() as c:
        r = c.call(DESCRIBE_CLIENT_QUOTAS, 1, components=components, strict=strict)
    check("describe client quotas", r.error_code, r.error_message)
    return [
        QuotaEntry(
            tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)),
            {v.key: v.value for v in entry.values},
        )
        for entry in r.entries or ()
    ]


def alter_quotas(
    brokers: Brokers,
    entity: Entity,
    add: dict[str, float],
    delete: list[str],
    validate_only: bool = False,
) -> AdminError | None:
    """AlterClientQuotas of one entity: set `add`, remove `delete`; the refusal, if any."""
    b = builder(ALTER_CLIENT_QUOTAS, 1)
    ops = tuple(b.OpData(key=k, value=v, remove=False) for k, v in add.items()) + tuple(
        b.OpData(key=k, value=0.0, remove=True) for k in delete
    )
    entry = b.EntryData(
        entity=tuple(b.EntityData(entity_type=k, entity_name=n) for k, n in entity), ops=ops
    )
    with brokers.any() as c:
        r = c.call(ALTER_CLIENT_QUOTAS, 1, entries=(entry,), validate_only=validate_only)
    for result in r.entries:
        error = refusal("alter client quotas", result.error_code, result.error_message)
        if error is not None:
            return error
    return None
