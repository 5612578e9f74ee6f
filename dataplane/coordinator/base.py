"""What every group type shares, and what a `GroupShard` needs of a group.

A group type (the classic protocol in `classic/group.py`; KIP-848 consumer groups in
`consumer/adapter.py`, around the pure logic of `consumer/group.py`) subclasses `Group`.
The shard owns the committed offsets and routes the group-agnostic APIs through these methods:
OffsetCommit/OffsetFetch member checks, DescribeGroups, ListGroups, DeleteGroups,
OffsetDelete, offsets expiry and unloading. The shard and its groups reach their host (config,
timers, clock, the cluster's topics, writes to `__consumer_offsets`) through the shard's
`ShardServices`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.consumer.group import ConsumerGroupConfig
from dataplane.coordinator.share.group import ShareGroupConfig
from dataplane.coordinator.streams.state import StreamsGroupConfig
from dataplane.coordinator.timer import Timer
from dataplane.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from dataplane.share.group_settings import GroupConfigs

log = logging.getLogger("rafka.coordinator")

T = TypeVar("T")

Records = Sequence[tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's group.* and offsets.* broker settings (defaults are Kafka's)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    # Kafka's group.classic.new.member.join.timeout (not a broker setting): a new member
    # parked in JoinGroup is dropped after this long.
    new_member_join_timeout_ms: int = 5 * 60 * 1000
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    # group.consumer.*: KIP-848 consumer groups
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    # group.share.*: KIP-932 share groups
    share: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    # group.streams.*: KIP-1071 streams groups
    streams: StreamsGroupConfig = field(default_factory=StreamsGroupConfig)


class Reply(Generic[T]):
    """A response that a later event completes (a parked JoinGroup or SyncGroup).

    Completing is synchronous (state machines run without awaiting); waiting needs an event
    loop. A reply that replaced another for the same member (a client that sent its request
    again) completes that one too, with the same value.
    """

    def __init__(self) -> None:
        self._value: T | None = None
        self._done = False
        self._event: anyio.Event | None = None
        self._chained: list[Reply[T]] = []

    @property
    def done(self) -> bool:
        return self._done

    @property
    def value(self) -> T:
        if not self._done:
            raise RuntimeError("reply not completed yet")
        return self._value  # type: ignore[return-value]

    def complete(self, value: T) -> bool:
        """Set the value; False if it was already set (the first value wins)."""
        if self._done:
            return False
        self._value, self._done = value, True
        if self._event is not None:
            self._event.set()
        for other in self._chained:
            other.complete(value)
        return True

    def chain(self, other: Reply[T] | None) -> None:
        """Complete `other` with whatever completes this one."""
        if other is not None and other is not self and not other.done:
            self._chained.append(other)

    async def wait(self) -> T:
        if not self._done:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        return self._value  # type: ignore[return-value]


class ShardServices:
    """What a shard and its groups need from whoever hosts the shard: the broker
    (`service.GroupCoordinator`) or a unit test. One instance per shard.

    A host implements the clocks, member ids, the cluster's topics, appends to the shard's
    partition and background work, and may listen to the hooks; `write` (an append whose
    completion is a callback) and the shard's `timer` are built on those, alike for every host.
    """

    # groups' GROUP configs (per-group timings); None: the config's defaults apply
    group_settings: GroupConfigs | None = None

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.timer = Timer(self.clock_ms, self.timer_changed)
        self.closed = False  # the shard was unloaded: writes answer NOT_COORDINATOR

    def clock_ms(self) -> int:
        """Monotonic milliseconds, for timers."""
        raise NotImplementedError

    def now_ms(self) -> int:
        """Wall-clock milliseconds (commit and state timestamps)."""
        raise NotImplementedError

    def new_member_id(self, prefix: str) -> str:
        """Kafka's `prefix-<uuid4>` member ids (prefix: client id, or group instance id)."""
        raise NotImplementedError

    def topics(self) -> Mapping[str, TopicMetadata]:
        """The cluster's topics by name, as consumer groups assign them (the same objects
        between calls while a topic does not change)."""
        raise NotImplementedError

    def append(self, group_id: str, records: Records, replay: bool) -> Awaitable[None]:
        """Append to the group's partition now (raise KafkaError if that is not possible);
        the awaitable completes once the records are replicated (raises KafkaError)."""
        raise NotImplementedError

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run `fn()` in the background."""
        raise NotImplementedError

    def timer_changed(self) -> None:
        """A timer deadline was scheduled (wake whoever fires the timer)."""

    def group_created(self, group_id: str) -> None:
        """A request created a group (it enters the meta service's registry)."""

    def loaded(self) -> None:
        """The shard finished replaying its partition."""

    def unloaded(self) -> None:
        """The shard was dropped."""

    def write(
        self,
        group_id: str,
        records: Records,
        *,
        replay: bool,
        done: Callable[[ErrorCode], None] | None = None,
    ) -> ErrorCode | None:
        """Append records to the group's partition now; `done(error)` once replicated (NONE)
        or failed. replay=False: the group already holds the state the records describe;
        replay=True: they are applied (replayed) before this returns. Returns None once
        appended, else the error that kept them out of the log (given to `done` too)."""
        waiter: Awaitable[None] | None = None
        error: ErrorCode | None = None
        if self.closed:
            error = ErrorCode.not_coordinator
        else:
            try:
                waiter = self.append(group_id, records, replay)
            except KafkaError as e:
                error = e.code

        async def finish() -> None:
            code = error
            if waiter is not None:
                try:
                    await waiter
                    code = ErrorCode.none
                except KafkaError as e:
                    code = e.code
                    log.warning("writing records of group %s failed: %s", group_id, e)
            if done is not None and code is not None:
                done(code)

        self.spawn(finish)
        return error


def map_append_error(error: ErrorCode) -> ErrorCode:
    """What clients get when a write of a group's state or offsets fails: Kafka's
    CoordinatorOperationExceptionHelper.handleOperationException, which its group coordinator
    applies to every operation, offset commits included (a write too large is
    UNKNOWN_SERVER_ERROR there too, no longer the old coordinator's INVALID_COMMIT_OFFSET_SIZE)."""
    if error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.unknown_server_error
    return error


# ---------------------------------------------------------------- the classic protocol's
# requests and answers (JoinGroup/SyncGroup), shared by every group type that serves it

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    api_version: int
    reason: str | None = None


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...] = ()
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    type: str  # "classic", "consumer"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: none (only OffsetCommit v2-v4 with a retention time)


class Group:
    """A group of one type. Subclasses implement the group-type-specific protocol; these are
    the hooks the shard's group-agnostic APIs call."""

    TYPE = "unknown"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id

    # -- identity and listing ---------------------------------------------------------------

    @property
    def state_name(self) -> str:
        """As ListGroups/DescribeGroups show it (Kafka's state names)."""
        raise NotImplementedError

    @property
    def protocol_type_name(self) -> str:
        """ListGroups' protocol_type ("consumer", "" for a simple group)."""
        raise NotImplementedError

    def is_empty(self) -> bool:
        raise NotImplementedError

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type_name, self.state_name, self.TYPE)

    @property
    def state_filter_name(self) -> str:
        """The state as ListGroups' states filter names it (Kafka's toLowerCaseString)."""
        return self.state_name.lower()

    def describe(self) -> DescribedGroup:
        raise NotImplementedError

    # -- offsets ----------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, api_version: int
    ) -> ErrorCode:
        """The error an OffsetCommit from this member/generation gets (NONE: accept)."""
        raise NotImplementedError

    def offset_commit_accepted(self, member_id: str) -> None:
        """An OffsetCommit of `member_id` passed the checks (the classic protocol counts it as
        a heartbeat); nothing for the other group types."""

    def validate_commit_partitions(
        self, member_id: str, generation: int, partitions: Iterable[tuple[str, int]]
    ) -> ErrorCode:
        """After `validate_offset_commit` took the commit: the error of the whole commit that
        one of its (topic, partition)s gets (Kafka's CommitPartitionValidator: a streams member
        may commit at an older epoch the tasks it had then); NONE for groups without one."""
        return ErrorCode.none

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ member checks (KIP-848); NONE for groups that do not check."""
        return ErrorCode.none

    def is_subscribed_to_topic(self, topic: str) -> bool:
        raise NotImplementedError

    def offsets_expire_from(self, offset: OffsetAndMetadata) -> int | None:
        """The timestamp an offset's retention counts from, or None if it cannot expire now
        (Kafka's OffsetExpirationCondition)."""
        raise NotImplementedError

    # -- deletion ---------------------------------------------------------------------------

    def validate_delete(self) -> ErrorCode:
        """DeleteGroups: NONE when the group may be deleted (NON_EMPTY_GROUP otherwise)."""
        raise NotImplementedError

    def validate_offset_delete(self) -> ErrorCode:
        raise NotImplementedError

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        """The records deleting the group itself (its offsets are the shard's)."""
        raise NotImplementedError

    # -- the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) sent to a group
    # of this type. KIP-848 consumer groups serve classic members here (the upgrade path);
    # the defaults answer as Kafka does for a group that cannot.

    def classic_join(self, req: JoinRequest, reply: Reply[JoinResult]) -> None:
        reply.complete(JoinResult(ErrorCode.inconsistent_group_protocol, ""))

    def classic_sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        reply: Reply[SyncResult],
    ) -> None:
        reply.complete(SyncResult(ErrorCode.unknown_member_id))

    def classic_heartbeat(
        self, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        return ErrorCode.unknown_member_id

    def classic_leave(
        self, members: Sequence[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(request-level error, one error per member): a group of another type has none of
        them (Kafka answers UNKNOWN_MEMBER_ID for each, as for a group that does not exist)."""
        return unknown_members(members)

    def on_loaded(self) -> None:
        """The shard finished replaying its partition: start the group's timers."""

    def unload(self) -> None:
        """The shard is dropped (leadership moved): answer parked requests NOT_COORDINATOR."""


def unknown_members(members: Sequence[object]) -> tuple[ErrorCode, list[ErrorCode]]:
    """LeaveGroup's answer when the group has none of `members`."""
    return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
