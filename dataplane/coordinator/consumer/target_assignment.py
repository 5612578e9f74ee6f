"""A KIP-848 consumer group's target assignment, computed when a heartbeat moves the group epoch
past the assignment epoch (Kafka's TargetAssignmentBuilder, and the subscription updates of
`GroupMetadataManager.consumerGroupHeartbeat` that feed it): the subscribed regular expressions
resolved against the cluster's topics, the server assignor the members vote for, and the
TargetAssignment records. Like the rest of the group's logic it only computes records; replaying
them changes the group."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from dataplane.coordinator.assignors import (
    ASSIGNORS,
    AssignorError,
    MemberSubscription,
    TopicMetadata,
)
from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.member import (
    NO_PARTITIONS,
    Member,
    ResolvedRegex,
    TopicPartitionsMap,
    freeze,
    record_key,
)
from dataplane.coordinator.consumer.requests import Record
from dataplane.coordinator.consumer.state import ConsumerGroupState
from dataplane.coordinator.subscriptions import check_regex, compile_regex, names_version
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.topic_admin import INTERNAL_TOPICS


class Regexes(NamedTuple):
    """The subscribed regular expressions once a member's subscription changed."""

    in_use: set[str]
    resolved: dict[str, ResolvedRegex]
    """Their resolutions, new ones included."""
    bump: bool
    """Whether the change alters what the group subscribes to (a new group epoch)."""
    refreshed: bool
    """Whether they were resolved against the topics now (the refresh interval restarts)."""


def update_regexes(
    group: ConsumerGroupState,
    previous: Member | None,
    updated: Member,
    last_refresh_ms: int | None,
    now_ms: int,
    topics: Mapping[str, TopicMetadata],
    records: list[Record],
) -> Regexes:
    """The group's regexes once `updated` replaces `previous`; adds the regex records. They are
    resolved again when a new one is not resolved yet, or when the refresh interval since
    `last_refresh_ms` passed and the topic names changed."""
    regexes = Counter(group.regex_counts)
    old = previous.regex if previous is not None else None
    new = updated.regex
    if old:
        regexes[old] -= 1
    if new:
        regexes[new] += 1
    in_use = {r for r, c in regexes.items() if c > 0}
    resolved = dict(group.resolved_regexes)
    bump = False
    if old != new:
        if old and old not in in_use and old in resolved:
            records.append(rec.encode(rec.RegexKey(group.group_id, old), None))
            del resolved[old]
        if new:
            check_regex(new)
            # A regex already resolved for others changes this member's topics now.
            bump = new in resolved
    if not in_use:
        return Regexes(in_use, resolved, bump, False)
    due = (
        last_refresh_ms is None
        or now_ms - last_refresh_ms >= group.config.regex_refresh_interval_ms
    )
    if not due and all(r in resolved for r in in_use):
        return Regexes(in_use, resolved, bump, False)
    names = sorted(n for n in topics if n not in INTERNAL_TOPICS)
    version = names_version(names)
    for regex in sorted(in_use):
        before = resolved.get(regex)
        if before is not None and before.version == version:
            continue
        pattern = compile_regex(regex)
        matched = frozenset(
            n for n in names if pattern is not None and pattern.fullmatch(n) is not None
        )
        after = ResolvedRegex(matched, version, now_ms)
        records.append(
            rec.encode(
                rec.RegexKey(group.group_id, regex),
                rec.RegularExpressionValue(tuple(sorted(matched)), version, now_ms),
            )
        )
        if (before.topics if before is not None else frozenset()) != matched:
            bump = True
        resolved[regex] = after
    return Regexes(in_use, resolved, bump, True)


def pick_assignor(counts: Mapping[str, int], configured: Sequence[str]) -> str:
    """The server assignor most members ask for (ties: the first name), else the default."""
    live = [(c, name) for name, c in counts.items() if c > 0 and name in ASSIGNORS]
    if not live:
        return configured[0]
    return min(live, key=lambda x: (-x[0], x[1]))[1]


def assignor_after(group: ConsumerGroupState, previous: Member | None, updated: Member) -> str:
    """The server assignor the group uses once `updated` replaces `previous`."""
    counts = Counter(group.assignor_counts)
    if previous is not None and previous.server_assignor:
        counts[previous.server_assignor] -= 1
    if updated.server_assignor:
        counts[updated.server_assignor] += 1
    return pick_assignor(counts, group.config.assignors)


def update_target(
    group: ConsumerGroupState,
    group_epoch: int,
    previous: Member | None,
    replaced: Member | None,
    updated: Member,
    resolved: Mapping[str, ResolvedRegex],
    topics: Mapping[str, TopicMetadata],
    now_ms: int,
    records: list[Record],
) -> TopicPartitionsMap:
    """The new target assignment of epoch `group_epoch` once `updated` replaces `previous`
    (and a static member's new id takes over from `replaced`): adds the records of every
    member whose target changed, then the epoch's; returns `updated`'s target."""
    members = dict(group.members)
    current = dict(group.target)
    if replaced is not None:
        members.pop(replaced.member_id, None)
        current[updated.member_id] = current.pop(replaced.member_id, NO_PARTITIONS)
    members[updated.member_id] = updated

    name = assignor_after(group, previous, updated)

    specs = {}
    for m in members.values():
        topics_of = set(m.subscribed_topic_names)
        if m.regex and m.regex in resolved:
            topics_of |= resolved[m.regex].topics
        specs[m.member_id] = MemberSubscription(frozenset(topics_of), m.rack_id)
    try:
        assignment = ASSIGNORS[name](specs, topics, current)
    except AssignorError as e:
        raise KafkaError(
            ErrorCode.unknown_server_error,
            f"Failed to compute a new target assignment for epoch {group_epoch}: {e}",
        ) from None

    gid = group.group_id
    result = {m: freeze(assignment.get(m, {})) for m in specs}
    for member_id in sorted(specs):
        if result[member_id] != group.target.get(member_id):
            records.append(
                rec.encode(
                    record_key(rec.TARGET_ASSIGNMENT_MEMBER, gid, member_id),
                    rec.target_assignment(result[member_id]),
                )
            )
    records.append(
        rec.encode(
            record_key(rec.TARGET_ASSIGNMENT_METADATA, gid),
            rec.TargetAssignmentMetadataValue(group_epoch, now_ms),
        )
    )
    return result[updated.member_id]
