"""Client quotas in the meta service's Raft state (Kafka's ClientQuotaControlManager).

A quota entity is a set of (entity type, name) components: ``user``, ``client-id`` (alone or
together) or ``ip`` (alone); a name of None is the type's default entity (Kafka's
``<default>``). Each entity maps quota keys to values; an entity left without quotas is
removed. ``alter`` validates each alteration as Kafka's controller does (the same
INVALID_REQUEST messages) and applies the valid ones; ``meta.dispatch`` only dispatches to it.
The command, its versioned record converters and the watch-event form live here.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from meta.protocol import ErrorCode
from proto import meta_pb2
from proto import metadata_entities_pb2 as entities_pb2
from proto import metadata_records_pb2 as pb

if TYPE_CHECKING:
    from meta.state import MetaState

log = logging.getLogger("rafka.meta.quotas")

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig definitions: key -> ConfigDef type of the value.
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
_TYPE_MAX = {"INT": 2**31 - 1, "LONG": 2**63 - 1}
_TYPE_ARTICLE = {"INT": "an INT", "LONG": "a LONG"}

QuotaEntity = tuple[tuple[str, str | None], ...]
"""The components of an entity, sorted by type: (("client-id", None), ("user", "alice"))."""


def entity_of(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """An entity from (type, name) pairs; a type given twice keeps its last name, as Kafka's
    request parsing does (it builds a map)."""
    return tuple(sorted(dict(components).items()))


def describe_entity(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity.toString, for messages and log lines."""
    entries = ", ".join(f"{kind}={'null' if name is None else name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


@dataclass(frozen=True)
class QuotaAlteration:
    """The quotas of one entity to change: (key, value) sets, (key, None) removes."""

    entity: QuotaEntity
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class AlterClientQuotas:
    """Kafka's AlterClientQuotas (49)."""

    alterations: tuple[QuotaAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class QuotaOutcome:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


class Changes(Protocol):
    def client_quota(self, entity: QuotaEntity) -> None: ...


def _invalid(message: str) -> QuotaOutcome:
    return QuotaOutcome(ErrorCode.INVALID_REQUEST, message)


def entity_refusal(entity: QuotaEntity) -> QuotaOutcome | None:
    """Kafka's validateEntity and configKeysForEntityType: a known, allowed combination."""
    if not entity:
        return _invalid("Invalid empty client quota entity")
    for kind, name in entity:
        if kind not in ENTITY_TYPES:
            return _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            return _invalid(f"Empty {kind} not supported")
    kinds = {kind for kind, _ in entity}
    if IP in kinds:
        if len(kinds) > 1:
            # Kafka's message, missing space included
            return _invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User "
                "or ClientId"
            )
        ip = dict(entity)[IP]
        if ip is not None and not _is_ip(ip):
            return _invalid(f"{ip} is not a valid IP or resolvable host.")
    return None


def _is_ip(name: str) -> bool:
    """A literal IP address. Kafka also resolves host names; a replicated state machine may
    not (the answer would differ between nodes), and connections are matched by address."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def keys_for(entity: QuotaEntity) -> Mapping[str, str]:
    """The quota keys an entity may have (valid entities only)."""
    return IP_KEYS if any(kind == IP for kind, _ in entity) else USER_CLIENT_KEYS


def value_refusal(keys: Mapping[str, str], key: str, value: float) -> QuotaOutcome | None:
    """Kafka's validateQuotaKeyValue."""
    kind = keys.get(key)
    if kind is None:
        return _invalid(f"Invalid configuration key {key}")
    if not value > 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return None
    if value > _TYPE_MAX[kind]:
        return _invalid(f"Proposed value for {key} is too large for {_TYPE_ARTICLE[kind]}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return _invalid(f"{key} cannot be a fractional value.")
    return None


def refusal(alteration: QuotaAlteration) -> QuotaOutcome | None:
    """Why Kafka's controller refuses this alteration; None: it is valid."""
    seen: set[str] = set()
    for key, _ in alteration.ops:
        if key in seen:
            return _invalid(
                f"Duplicate quota key {key} not updating quota for this entity "
                f"{describe_entity(alteration.entity)}"
            )
        seen.add(key)
    if (refused := entity_refusal(alteration.entity)) is not None:
        return refused
    keys = keys_for(alteration.entity)
    for key, value in alteration.ops:
        if value is not None and (refused := value_refusal(keys, key, value)) is not None:
            return refused
    return None


def alter(state: MetaState, cmd: AlterClientQuotas, changes: Changes) -> list[QuotaOutcome]:
    """Apply each valid alteration (none with validate_only); an outcome per alteration. An
    entity named twice in one request is refused the second time, as Kafka does."""
    outcomes: list[QuotaOutcome] = []
    seen: set[QuotaEntity] = set()
    for alteration in cmd.alterations:
        entity = alteration.entity
        refused = refusal(alteration)
        if entity in seen:
            refused = _invalid(f"Ignoring duplicate entity {describe_entity(entity)}")
        seen.add(entity)
        if refused is not None:
            log.warning(
                "Refused to alter the client quotas of %s: %s",
                describe_entity(entity),
                refused.error_message,
            )
            outcomes.append(refused)
            continue
        outcomes.append(QuotaOutcome())
        if cmd.validate_only:
            continue
        old = state.client_quotas.get(entity, {})
        new = dict(old)
        for key, value in alteration.ops:
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value
        if new == old:
            continue
        if new:
            state.client_quotas[entity] = new
        else:
            state.client_quotas.pop(entity, None)
        changes.client_quota(entity)
        log.info(
            "Altered the client quotas of %s: now %s",
            describe_entity(entity),
            new or "none",
        )
    return outcomes


# ---------------------------------------------------------------- wire and records


def entity_to_proto(entity: QuotaEntity) -> list[entities_pb2.QuotaEntityComponent]:
    """The entity as QuotaEntityComponent messages (a default entity's without a name)."""
    return [
        entities_pb2.QuotaEntityComponent(entity_type=kind, entity_name=name)
        for kind, name in entity
    ]


def entity_from_proto(components: Iterable[entities_pb2.QuotaEntityComponent]) -> QuotaEntity:
    return entity_of(
        (c.entity_type, c.entity_name if c.HasField("entity_name") else None) for c in components
    )


def alterations_to_proto(
    alterations: Iterable[QuotaAlteration],
) -> list[entities_pb2.ClientQuotaAlteration]:
    return [
        entities_pb2.ClientQuotaAlteration(
            entity=entity_to_proto(a.entity),
            ops=[
                entities_pb2.QuotaOp(key=key, remove=True)
                if value is None
                else entities_pb2.QuotaOp(key=key, value=value)
                for key, value in a.ops
            ],
        )
        for a in alterations
    ]


def alterations_from_proto(
    messages: Iterable[entities_pb2.ClientQuotaAlteration],
) -> tuple[QuotaAlteration, ...]:
    return tuple(
        QuotaAlteration(
            entity_from_proto(m.entity),
            tuple((op.key, None if op.remove else op.value) for op in m.ops),
        )
        for m in messages
    )


def command_record(cmd: AlterClientQuotas) -> pb.AlterClientQuotas:
    return pb.AlterClientQuotas(
        alterations=alterations_to_proto(cmd.alterations), validate_only=cmd.validate_only
    )


def command_from(record: pb.AlterClientQuotas) -> AlterClientQuotas:
    return AlterClientQuotas(alterations_from_proto(record.alterations), record.validate_only)


def result_record(outcomes: list[QuotaOutcome]) -> pb.AlterConfigsResult:
    return pb.AlterConfigsResult(
        resources=[
            pb.Outcome(error_code=o.error_code, error_message=o.error_message) for o in outcomes
        ]
    )


def result_from(record: pb.AlterConfigsResult) -> list[QuotaOutcome]:
    return [QuotaOutcome(ErrorCode(o.error_code), o.error_message) for o in record.resources]


def state_records(quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> list[pb.ClientQuotas]:
    return [
        pb.ClientQuotas(
            entity=entity_to_proto(entity),
            values=[pb.QuotaValue(key=k, value=v) for k, v in values.items()],
        )
        for entity, values in quotas.items()
    ]


def state_from(records: Iterable[pb.ClientQuotas]) -> dict[QuotaEntity, dict[str, float]]:
    return {entity_from_proto(r.entity): {v.key: v.value for v in r.values} for r in records}


def quota_to_proto(state: MetaState, entity: QuotaEntity) -> meta_pb2.ClientQuota:
    """The watch-event form of an entity's quotas (empty values: it has none any more)."""
    return meta_pb2.ClientQuota(
        entity=entity_to_proto(entity),
        values=state.client_quotas.get(entity, {}),
    )
