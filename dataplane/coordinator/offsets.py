"""The committed offsets of one `__consumer_offsets` partition (Kafka's OffsetMetadataManager).

Offsets belong to the shard, whatever the type of the group that commits them: the group is
asked only whether a commit, fetch or deletion is allowed (`base.Group` hooks) and which topics
it subscribes to (their offsets never expire, nor may they be deleted).

A commit's offsets are *pending* until its records are replicated (`store`): OffsetFetch
answers the last replicated offsets meanwhile (UNSTABLE_OFFSET_COMMIT with require_stable),
and a failed write drops them, as Kafka's GroupMetadataManager does.

Transactional offsets (TxnOffsetCommit) are kept per producer until the producer's transaction
ends in this partition (Kafka's pendingTransactionalOffsets): a COMMIT marker makes them the
committed offsets unless a commit written after them already replaced them, an ABORT drops
them. Meanwhile OffsetFetch answers the committed offsets, or UNSTABLE_OFFSET_COMMIT with
require_stable. To tell which commit is the more recent, every offset remembers the *position*
of its record: its log offset when replayed, and for records appended since loading, a counter
that follows the log's order (appends happen in the order the shard makes them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from dataplane.coordinator.base import Group, OffsetAndMetadata, Records, Reply, ShardServices
from dataplane.coordinator.records import (
    OffsetCommitValue,
    decode_record,
    offset_commit_key,
    offset_commit_record,
)
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode

log = logging.getLogger("rafka.coordinator.offsets")

KeyValue = tuple[bytes, bytes | None]
OffsetKey = tuple[str, str, int]  # group, topic, partition


def _offset_and_metadata(value: OffsetCommitValue) -> OffsetAndMetadata:
    """A committed offset as an OffsetCommit record's value holds it."""
    return OffsetAndMetadata(
        value.offset,
        value.leader_epoch,
        value.metadata,
        value.commit_timestamp,
        value.expire_timestamp,
    )


class _InFlight(NamedTuple):
    """A commit record appended but not replicated yet, and its position."""

    record: KeyValue
    position: int


class _TxnOffset(NamedTuple):
    """A transactional offset waiting for its transaction's marker."""

    offset: OffsetAndMetadata
    position: int


@dataclass(frozen=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1: none
    metadata: str | None
    commit_timestamp: int = -1  # OffsetCommit v1's; -1: now


class FetchedPartition(NamedTuple):
    partition: int
    offset: OffsetAndMetadata | None  # None: no committed offset
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True)
class FetchedTopic:
    topic: str
    partitions: tuple[FetchedPartition, ...]


class OffsetStore:
    """Committed and pending offsets by group, and the OffsetCommit/OffsetFetch/OffsetDelete
    logic and offsets retention over them. `groups` is the shard's groups by id (shared)."""

    def __init__(
        self,
        services: ShardServices,
        groups: dict[str, Group],
        classic_group: Callable[[str, bool], Group],
    ) -> None:
        """`classic_group(group_id, created_by_request)` adds the classic group Kafka keeps for
        offsets of a group nobody joined (assign() consumers, admin tools)."""
        self.services = services
        self.groups = groups
        self._classic_group = classic_group
        # group -> topic -> partition -> committed offset
        self.committed: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # (group, topic, partition) -> position of the committed offset's record
        self.positions: dict[OffsetKey, int] = {}
        # group -> record key -> commits appended but not yet replicated, oldest first
        self.pending: dict[str, dict[bytes, list[_InFlight]]] = {}
        # producer id -> (group, topic, partition) -> offset of its ongoing transaction
        self.transactional: dict[int, dict[OffsetKey, _TxnOffset]] = {}
        # group -> producers with transactional offsets of the group pending
        self.open_transactions: dict[str, set[int]] = {}
        self._next_position = 0

    # -- replay ----------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        assert record.key is not None
        self._seen(record.offset)
        self._apply(record.key, record.value, record.offset)

    def replay_transactional(self, producer_id: int, record: Record) -> None:
        """A record of the producer's transactional batch: pending until its marker (Kafka's
        replay with a producer id). A tombstone there deletes like any other."""
        assert record.key is not None
        self._seen(record.offset)
        if record.value is None:
            self._apply(record.key, None, record.offset)
        else:
            self._add_transactional(producer_id, [(record.key, record.value)], record.offset)

    def _seen(self, offset: int) -> None:
        if offset >= self._next_position:
            self._next_position = offset + 1

    def _position(self) -> int:
        """The position of a record appended now (see the module)."""
        position = self._next_position
        self._next_position += 1
        return position

    def _apply(self, record_key: bytes, record_value: bytes | None, position: int) -> None:
        decoded = decode_record(record_key, record_value)
        assert decoded is not None
        key = decoded.key
        offset_key = (key.group, key.topic, key.partition)
        if decoded.value is None:
            # a deletion also cancels the commits in flight, transactional ones included
            # (Kafka's removeOffsets)
            pending = self.pending.get(key.group)
            if pending is not None and pending.pop(record_key, False) and not pending:
                del self.pending[key.group]
            for producer_id in self.open_transactions.get(key.group, ()):
                self.transactional.get(producer_id, {}).pop(offset_key, None)
            self.positions.pop(offset_key, None)
            topics = self.committed.get(key.group)
            if topics is not None and key.topic in topics:
                topics[key.topic].pop(key.partition, None)
                if not topics[key.topic]:
                    del topics[key.topic]
                if not topics:
                    del self.committed[key.group]
            return
        value: OffsetCommitValue = decoded.value
        self._commit(
            offset_key,
            _offset_and_metadata(value),
            position,
        )

    def _commit(self, key: OffsetKey, offset: OffsetAndMetadata, position: int) -> bool:
        """Make `offset` the committed one unless a more recent record already set it."""
        group, topic, partition = key
        if self.positions.get(key, -1) > position:
            return False
        if group not in self.groups:
            self._classic_group(group, False)
        self.committed.setdefault(group, {}).setdefault(topic, {})[partition] = offset
        self.positions[key] = position
        return True

    # -- OffsetCommit ------------------------------------------------------------------------

    def commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        api_version: int,
        partitions: Sequence[CommitPartition],
        expire_timestamp: int = -1,
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[KeyValue]]:
        """Validate a commit: (group-level error, per-partition errors, records to write)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # a member of a generation of a group that does not exist
                code = (
                    ErrorCode.group_id_not_found
                    if api_version >= 9
                    else ErrorCode.illegal_generation
                )
                return code, {}, []
            group = self._classic_group(group_id, True)
        error = group.validate_offset_commit(member_id, instance_id, generation, api_version)
        if error == ErrorCode.none:
            error = group.validate_commit_partitions(
                member_id, generation, self.validated_partitions(partitions)
            )
        if error != ErrorCode.none:
            return error, {}, []
        group.offset_commit_accepted(member_id)
        errors, records = self.records(group_id, partitions, expire_timestamp)
        return ErrorCode.none, errors, records

    def _metadata_too_large(self, p: CommitPartition) -> bool:
        return len(p.metadata or "") > self.services.config.offset_metadata_max_bytes

    def validated_partitions(self, partitions: Sequence[CommitPartition]) -> list[tuple[str, int]]:
        """The (topic, partition)s a group's per-partition check sees: as Kafka, not those
        whose metadata is too large (they get OFFSET_METADATA_TOO_LARGE, whatever the group)."""
        return [(p.topic, p.partition) for p in partitions if not self._metadata_too_large(p)]

    def records(
        self, group_id: str, partitions: Sequence[CommitPartition], expire_timestamp: int = -1
    ) -> tuple[dict[tuple[str, int], ErrorCode], list[KeyValue]]:
        """The records of a validated commit, and each partition's error
        (OFFSET_METADATA_TOO_LARGE, or NONE for those with a record)."""
        now = self.services.now_ms()
        errors: dict[tuple[str, int], ErrorCode] = {}
        records = []
        for p in partitions:
            metadata = p.metadata or ""
            if self._metadata_too_large(p):
                errors[p.topic, p.partition] = ErrorCode.offset_metadata_too_large
                continue
            committed_at = now if p.commit_timestamp == -1 else p.commit_timestamp
            value = OffsetCommitValue(
                p.offset, p.leader_epoch, metadata, committed_at, expire_timestamp
            )
            records.append(offset_commit_record(group_id, p.topic, p.partition, value))
            errors[p.topic, p.partition] = ErrorCode.none
        return errors, records

    def store(self, group_id: str, records: Records) -> Reply[ErrorCode]:
        """Write the records of a validated commit (`commit`). Until they are replicated they
        are pending: OffsetFetch still answers the previous offsets; once replicated they
        replace them, and a failed write drops them (Kafka's prepareOffsetCommit /
        onOffsetCommitAppend / failPendingOffsetWrite). The reply completes with the write's
        error (NONE: replicated)."""
        reply: Reply[ErrorCode] = Reply()
        if not records:
            reply.complete(ErrorCode.none)
            return reply
        pending = self.pending.setdefault(group_id, {})
        for record in records:
            pending.setdefault(record[0], []).append(_InFlight(record, self._position()))

        def done(error: ErrorCode) -> None:
            self._settle(group_id, records, replicated=error == ErrorCode.none)
            reply.complete(error)

        refused = self.services.write(group_id, records, replay=False, done=done)
        if refused is not None:  # not even appended (a replication failure is logged by write)
            log.info(
                "offset commit of group %s not written: %s; clients retry", group_id, refused.name
            )
            self._settle(group_id, records, replicated=False)
        return reply

    def _settle(self, group_id: str, records: Records, *, replicated: bool) -> None:
        """End the pending state of these commit records: replicated ones become the committed
        offsets (and older commits of the same partitions still in flight can no longer
        replace them); failed ones are dropped. Records no longer pending (a deletion, or a
        newer commit already applied) are left alone."""
        pending = self.pending.get(group_id, {})
        for record in records:
            queue = pending.get(record[0], [])
            index = next((i for i, r in enumerate(queue) if r.record is record), None)
            if index is None:
                continue
            if replicated:
                position = queue[index].position
                del queue[: index + 1]
                self._apply(*record, position)
            else:
                del queue[index]
            if not queue:
                del pending[record[0]]
        if not pending:
            self.pending.pop(group_id, None)

    # -- TxnOffsetCommit ----------------------------------------------------------------------

    def add_transactional(self, producer_id: int, records: Records) -> list[_TxnOffset]:
        """Offsets of a TxnOffsetCommit just appended for the producer: pending until its
        marker. Returns them, for `drop_transactional` if the write fails."""
        return self._add_transactional(producer_id, records, None)

    def _add_transactional(
        self, producer_id: int, records: Records, position: int | None
    ) -> list[_TxnOffset]:
        added = []
        by_key = self.transactional.setdefault(producer_id, {})
        for record_key, record_value in records:
            decoded = decode_record(record_key, record_value)
            assert decoded is not None and decoded.value is not None
            key, value = decoded.key, decoded.value
            if key.group not in self.groups:
                self._classic_group(key.group, False)
            entry = _TxnOffset(
                _offset_and_metadata(value),
                self._position() if position is None else position,
            )
            by_key[key.group, key.topic, key.partition] = entry
            self.open_transactions.setdefault(key.group, set()).add(producer_id)
            added.append(entry)
        return added

    def drop_transactional(self, producer_id: int, entries: Sequence[_TxnOffset]) -> None:
        """Forget transactional offsets whose write failed (as Kafka reverts it)."""
        by_key = self.transactional.get(producer_id, {})
        dropped = {id(e) for e in entries}
        for key, entry in list(by_key.items()):
            if id(entry) in dropped:
                del by_key[key]
        self._forget_if_done(producer_id, by_key)

    def _forget_if_done(self, producer_id: int, by_key: dict[OffsetKey, _TxnOffset]) -> None:
        groups = {group for group, _, _ in by_key}
        for group in list(self.open_transactions):
            if group not in groups:
                producers = self.open_transactions[group]
                producers.discard(producer_id)
                if not producers:
                    del self.open_transactions[group]
        if not by_key:
            self.transactional.pop(producer_id, None)

    def end_transaction(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended in this partition (Kafka's
        replayEndTransactionMarker): its offsets become the committed ones, or are dropped.
        Returns how many were committed."""
        by_key = self.transactional.pop(producer_id, None)
        if by_key is None:
            return 0
        for group in {group for group, _, _ in by_key}:
            producers = self.open_transactions.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.open_transactions[group]
        if not commit:
            return 0
        committed = 0
        for key, entry in by_key.items():
            if self._commit(key, entry.offset, entry.position):
                committed += 1
            else:
                log.info(
                    "group %s: the transactional offset of %s-%d by producer %d was replaced "
                    "by a later commit before its transaction committed; keeping the later one",
                    *key,
                    producer_id,
                )
        return committed

    def has_transactional(self, group_id: str, topic: str, partition: int) -> bool:
        """Kafka's hasPendingTransactionalOffsets."""
        key = (group_id, topic, partition)
        return any(
            key in self.transactional.get(producer_id, {})
            for producer_id in self.open_transactions.get(group_id, ())
        )

    # -- OffsetFetch -------------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, list[FetchedTopic]]:
        """Committed offsets of `topics` (None: every committed partition). With
        require_stable, a partition with a commit in flight answers UNSTABLE_OFFSET_COMMIT
        (the client retries) instead of the offset that commit is replacing."""
        group = self.groups.get(group_id)
        offsets = self.committed.get(group_id, {})
        if group is not None:
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error == ErrorCode.group_id_not_found:
                offsets = {}
            elif error != ErrorCode.none:
                return error, []
        if topics is None:  # only transactional commits in flight count here (as in Kafka)
            return ErrorCode.none, [
                FetchedTopic(
                    topic,
                    tuple(
                        self._fetched(group_id, topic, p, offset, require_stable, None)
                        for p, offset in sorted(parts.items())
                    ),
                )
                for topic, parts in offsets.items()
            ]
        pending = self.pending.get(group_id) if require_stable else None
        return ErrorCode.none, [
            FetchedTopic(
                topic,
                tuple(
                    self._fetched(
                        group_id, topic, p, offsets.get(topic, {}).get(p), require_stable, pending
                    )
                    for p in partitions
                ),
            )
            for topic, partitions in topics
        ]

    def _fetched(
        self,
        group_id: str,
        topic: str,
        partition: int,
        offset: OffsetAndMetadata | None,
        require_stable: bool,
        pending: dict[bytes, list[_InFlight]] | None,
    ) -> FetchedPartition:
        if require_stable and (
            (pending and offset_commit_key(group_id, topic, partition) in pending)
            or self.has_transactional(group_id, topic, partition)
        ):
            return FetchedPartition(partition, None, ErrorCode.unstable_offset_commit)
        return FetchedPartition(partition, offset)

    # -- OffsetDelete, group deletion, retention -----------------------------------------------

    def delete(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], list[KeyValue]]:
        """OffsetDelete: (group error, per-partition errors, tombstones)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, {}, []
        error = group.validate_offset_delete()
        if error != ErrorCode.none:
            return error, {}, []
        offsets = self.committed.get(group_id, {})
        pending = self.pending.get(group_id, {})
        errors: dict[tuple[str, int], ErrorCode] = {}
        records = []
        for topic, partitions in topics:
            subscribed = group.is_subscribed_to_topic(topic)
            for p in partitions:
                if subscribed:
                    errors[topic, p] = ErrorCode.group_subscribed_to_topic
                    continue
                tombstone = offset_commit_record(group_id, topic, p, None)
                if (
                    p in offsets.get(topic, {})
                    or tombstone[0] in pending
                    or self.has_transactional(group_id, topic, p)
                ):
                    records.append(tombstone)  # a commit in flight is deleted too
                errors[topic, p] = ErrorCode.none
        return ErrorCode.none, errors, records

    def tombstones(self, group_id: str) -> list[KeyValue]:
        """Tombstones of all the group's offsets, those of commits in flight included."""
        keys = dict.fromkeys(
            offset_commit_key(group_id, topic, p)
            for topic, parts in self.committed.get(group_id, {}).items()
            for p in parts
        )
        keys |= dict.fromkeys(self.pending.get(group_id, {}))
        keys |= dict.fromkeys(
            offset_commit_key(group, topic, p)
            for producer_id in self.open_transactions.get(group_id, ())
            for group, topic, p in self.transactional.get(producer_id, {})
            if group == group_id
        )
        return [(key, None) for key in keys]

    def expire(self) -> tuple[dict[str, list[KeyValue]], list[str]]:
        """Kafka's offsets retention: tombstones of the offsets past offsets.retention.ms (per
        group), and the empty groups left without offsets (deleted too)."""
        now = self.services.now_ms()
        retention = self.services.config.offsets_retention_ms
        by_group: dict[str, list[KeyValue]] = {}
        deleted: list[str] = []
        for group_id, group in list(self.groups.items()):
            records = []
            # Kafka's hasOffsets; a group with transactional offsets pending stays
            all_expired = group_id not in self.pending and group_id not in self.open_transactions
            for topic, parts in self.committed.get(group_id, {}).items():
                if group.is_subscribed_to_topic(topic):
                    all_expired = False
                    continue
                for p, offset in parts.items():
                    base = group.offsets_expire_from(offset)
                    if (
                        base is not None
                        and (
                            now >= offset.expire_timestamp
                            if offset.expire_timestamp >= 0
                            else now - base >= retention
                        )
                        and not self.has_transactional(group_id, topic, p)
                    ):
                        records.append(offset_commit_record(group_id, topic, p, None))
                    else:
                        all_expired = False
            if all_expired and group.is_empty():
                records += group.tombstones()
                deleted.append(group_id)
            if records:
                by_group[group_id] = records
        return by_group, deleted
