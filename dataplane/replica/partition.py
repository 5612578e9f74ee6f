"""One replica of a topic-partition on this broker: its log, its role and its high watermark.

As leader it tracks how far each follower has fetched, advances the high watermark to what
every in-sync replica has (consumers never read past it; acks=all completes once it passes the
batch), and decides when a follower joins or leaves the ISR — the change itself is committed
by the meta service (AlterPartition), fenced by leader and partition epochs. As follower it
appends what the leader sends and takes the leader's high watermark.

Transactions: the last stable offset (LSO) is the high watermark, or the first offset of the
oldest undecided transaction if lower (`last_stable_offset`); read_committed consumers read up to
it. The leader writes the markers the transaction coordinator asks for (`write_marker`); a
follower applies them as it replicates them. The LSO moves only when the high watermark moves or
a marker is written, and both wake the fetch long polls parked on the high watermark.

KIP-890 part 1: before asking the transaction coordinator about a producer's first batch here,
the caller takes a guard (`maybe_start_transaction_verification`) and passes it to `append`; a
marker written meanwhile invalidates it, so a late batch cannot open a hanging transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio

from dataplane.log import AppendResult, PartitionLog
from dataplane.log.control import build_marker_batch
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.acks import PendingAcks, ReplicationWait
from dataplane.replica.producer_state import ProducerStateManager, VerificationGuard

log = logging.getLogger("rafka.partition")

_VERIFY_ATTEMPTS = 3  # coordinator checks of one append whose guard a marker voided


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class FetchSession(Protocol):
    """A follower's replication stream that holds its last fetch open as a standing fetch
    (dataplane/replica/replication_session.py): told of every change that may concern it."""

    last_request_ms: int  # the follower's last request on the stream: its liveness

    def partition_changed(self, partition: Partition, urgent: bool) -> None: ...


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its fetches (Kafka's Replica state)."""

    log_end_offset: int = -1  # unknown until it fetches
    log_start_offset: int = -1  # unknown until it fetches (DeleteRecords' low watermark)
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1
    # The session whose standing fetch reported `log_end_offset`: the follower re-asks for
    # that offset at each of its requests, so it is caught up as of its last request for as
    # long as the leader's log ends there (Kafka's followers re-send every fetch instead).
    session: FetchSession | None = None
    # Its broker epoch as its fetches said (KIP-903): sent with an ISR change, so that the meta
    # service refuses a member that registered again since (a restart may have lost its log).
    broker_epoch: int = -1

    def caught_up_ms(self, leader_end: int) -> int:
        """When it was last caught up, counting a standing fetch at the log end."""
        if self.session is not None and self.log_end_offset >= leader_end:
            return max(self.last_caught_up_ms, self.session.last_request_ms)
        return self.last_caught_up_ms


IsrSubmit = Callable[["Partition", tuple[int, ...]], None]


class Partition:
    """Role, epochs, ISR and high watermark around a PartitionLog."""

    def __init__(
        self,
        topic: str,
        topic_id: bytes,
        index: int,
        plog: PartitionLog,
        producers: ProducerStateManager,
        node_id: int,
        submit_isr: IsrSubmit,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.log = plog
        self.producers = producers
        self.node_id = node_id
        self._submit_isr = submit_isr
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.min_insync_replicas = 1
        self.high_watermark = plog.log_start_offset
        producers.on_high_watermark(self.high_watermark)
        self.pending_isr: tuple[int, ...] | None = None  # an AlterPartition in flight
        self.followers: dict[int, FollowerState] = {}
        self._epoch_start_offset = 0  # log end when this leader epoch began
        self._hw_waiters: set[anyio.Event] = set()  # fetch long polls
        self._acks = PendingAcks()  # acks=all produces and internal writes
        self._start_waiters: set[anyio.Event] = set()  # DeleteRecords: a log start moved
        self._sessions: set[FetchSession] = set()  # followers' standing fetches of it

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    # -- metadata --------------------------------------------------------------------------

    def update(self, info: PartitionInfo) -> None:
        """Apply leadership/ISR state from the meta service (watch stream or AlterPartition)."""
        same_epoch = info.leader_epoch == self.leader_epoch
        if same_epoch and info.partition_epoch < self.partition_epoch:
            return  # older than what an AlterPartition response already gave us
        became_leader = info.leader == self.node_id and not (self.is_leader and same_epoch)
        self.leader, self.leader_epoch = info.leader, info.leader_epoch
        self.partition_epoch = info.partition_epoch
        self.replicas = info.replicas
        if info.isr != self.isr or not same_epoch:
            self.pending_isr = None
        self.isr = info.isr
        if became_leader:
            self._become_leader()
        self._wake(self._hw_waiters)
        self._acks.settle(self)  # acks=all waits: leadership or ISR moved
        self._wake(self._start_waiters)
        self._notify(urgent=True)  # standing fetches: leadership, epoch or ISR changed
        self._maybe_advance_high_watermark()

    def _become_leader(self) -> None:
        """Kafka's makeLeader: followers in the ISR count as caught up from now on."""
        now = now_ms()
        self._epoch_start_offset = self.log.log_end_offset
        self.log.start_epoch(self.leader_epoch)
        self.followers = {
            r: FollowerState(last_caught_up_ms=now if r in self.isr else 0)
            for r in self.replicas
            if r != self.node_id
        }
        log.info(
            "%r: leader at epoch %d (log end %d, high watermark %d, ISR %s)",
            self,
            self.leader_epoch,
            self.log.log_end_offset,
            self.high_watermark,
            list(self.isr),
        )

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Kafka's fencing of requests that name a leader epoch (KIP-320)."""
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.not_leader_or_follower, f"broker {self.node_id} does not lead {self!r}"
            )
        self.check_epoch(current_leader_epoch)

    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)

    # -- leader ----------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: committed, plus members being added (KIP-497)."""
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def append(
        self,
        records: bytes | bytearray | memoryview,
        now: int,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Validate, check idempotent-producer sequences, append. A retried batch the log
        already has is answered with its original offsets and not appended again. A
        transactional batch that opens the producer's transaction here needs the guard of
        `maybe_start_transaction_verification`, still current (else INVALID_TXN_STATE)."""
        infos = self.log.validate(records, now)
        duplicate = self.producers.check(infos, verification_guard, require_verification=True)
        if duplicate is not None:
            append_time = duplicate.timestamp if self.log.config.log_append_time else -1
            return AppendResult(duplicate.first_offset, duplicate.last_offset, append_time, [])
        self._note_standing_fetches()
        result = self.log.append_as_leader(records, self.leader_epoch, now, validated=infos)
        self.producers.update(result.batches)
        self._notify(urgent=True)
        self._maybe_advance_high_watermark()
        return result

    def write_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
    ) -> AppendResult:
        """Append a COMMIT or ABORT marker for the producer's transaction (Kafka's
        WriteTxnMarkers on the leader): ends its open transaction here (an abort goes to the
        transaction index) and moves the LSO. Raises `KafkaError` NOT_LEADER_OR_FOLLOWER,
        INVALID_PRODUCER_EPOCH (an older producer epoch) or TRANSACTION_COORDINATOR_FENCED (an
        older coordinator epoch). The caller waits for replication (`wait_for_replication`)."""
        self.check_leader()
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = build_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        self._note_standing_fetches()
        result = self.log.append_as_leader(batch, self.leader_epoch, now_ms, from_client=False)
        self.producers.update(result.batches)
        self._notify(urgent=True)
        self._maybe_advance_high_watermark()
        self._wake(self._hw_waiters)  # read_committed polls: the LSO may have moved
        return result

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed reads stop: the high watermark, or the first offset of the
        oldest transaction that is open or whose marker is not yet below the high watermark."""
        first = self.producers.first_unstable_offset
        hw = self.high_watermark
        return hw if first is None else min(hw, first)

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer (at this epoch) already wrote to this partition in its current
        transaction, so a new transactional batch needs no coordinator check (KIP-890)."""
        return self.producers.has_open_transaction(producer_id, producer_epoch)

    def maybe_start_transaction_verification(
        self,
        producer_id: int,
        sequence: int,
        producer_epoch: int,
        supports_epoch_bump: bool = False,
    ) -> VerificationGuard | None:
        """Kafka's maybeStartTransactionVerification: None when the producer's transaction is
        already open here at this epoch (no coordinator check needed), else the guard to pass
        to `append` once the coordinator confirmed the partition is in the transaction.
        ``supports_epoch_bump``: a transaction version 2 producer (`start_verification`)."""
        if self.producers.has_open_transaction(producer_id, producer_epoch):
            return None
        return self.producers.start_verification(
            producer_id, sequence, producer_epoch, now_ms(), supports_epoch_bump
        )

    async def verify_transaction(
        self,
        producer_id: int,
        sequence: int,
        producer_epoch: int,
        ask: Callable[[], Awaitable[ErrorCode]],
        supports_epoch_bump: bool = False,
    ) -> tuple[ErrorCode, VerificationGuard | None]:
        """KIP-890 part 1 around the coordinator's answer (``ask``): NONE and the guard for
        `append` (None: the transaction is open here already, nothing to ask), or the
        coordinator's error. A marker written while the coordinator was asked voids the guard;
        that marker may be the end of the producer's *previous* transaction (the coordinator
        answers for the next one only once those markers are written), so the question is
        asked again with a fresh guard: for a batch of a transaction that has really ended the
        coordinator then refuses it."""
        for _ in range(_VERIFY_ATTEMPTS):
            guard = self.maybe_start_transaction_verification(
                producer_id, sequence, producer_epoch, supports_epoch_bump
            )
            if guard is None:
                return ErrorCode.none, None
            code = await ask()
            if code != ErrorCode.none or self.producers.verification_guard(producer_id) is guard:
                return code, guard
        return ErrorCode.concurrent_transactions, None  # the producer retries (as Kafka's)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on this replica: the log start moves up to ``offset``, past an open
        transaction's first records too, as Kafka's maybeIncrementLogStartOffset does (the
        last stable offset is then the log start until its marker). Returns the log start."""
        before = self.log.log_start_offset
        start = self.log.delete_records_before(offset)
        if start > before:
            self._wake(self._hw_waiters)  # consumers' fetch sessions answer the new log start
        return start

    def delete_records_on_leader(self, offset: int) -> int:
        """Kafka's deleteRecordsOnLeader: move the log start to ``offset`` (-1: the high
        watermark) and return the offset every replica's log start must reach before the
        deletion is complete (`wait_for_low_watermark`). Raises `KafkaError` NOT_LEADER_OR_FOLLOWER,
        POLICY_VIOLATION (cleanup.policy without delete) or OFFSET_OUT_OF_RANGE (beyond the
        high watermark). The segments wholly below go at the next retention check."""
        self.check_leader()
        if not self.log.config.delete:
            raise KafkaError(
                ErrorCode.policy_violation,
                f"Records of partition {self!r} can not be deleted due to the configured policy",
            )
        target = self.high_watermark if offset == -1 else offset
        if not 0 <= target <= self.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"Cannot increment the log start offset to {target} of partition {self!r} "
                f"since it is outside [0, high watermark {self.high_watermark}]",
            )
        before = self.log.log_start_offset
        start = self.delete_records_before(target)
        if start > before:
            log.info("%r: records before %d deleted (log start was %d)", self, start, before)
            self._wake(self._start_waiters)
            self._notify(urgent=True)  # parked follower fetches carry the new start now
        return min(start, target)

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """Kafka's lowWatermarkIfLeader: the lowest log start offset of this replica and of
        the followers on live brokers (``alive``); -1 for a follower that has not fetched."""
        low = self.log.log_start_offset
        for r in self.replicas:
            if r != self.node_id and alive(r):
                follower = self.followers.get(r)
                low = min(low, follower.log_start_offset if follower else -1)
        return low

    async def wait_for_low_watermark(
        self, offset: int, leader_epoch: int, timeout: float, alive: Callable[[int], bool]
    ) -> tuple[ErrorCode, int]:
        """DeleteRecords (Kafka's DelayedDeleteRecords): wait until every live replica's log
        start reached ``offset``. (NONE, low watermark); NOT_LEADER_OR_FOLLOWER when
        leadership moved; REQUEST_TIMED_OUT with the low watermark reached so far."""
        with anyio.move_on_after(timeout):
            while True:
                if not self.is_leader or self.leader_epoch != leader_epoch:
                    return ErrorCode.not_leader_or_follower, -1
                low = self.low_watermark(alive)
                if low >= offset:
                    return ErrorCode.none, low
                await self._wait(self._start_waiters)
        if not self.is_leader or self.leader_epoch != leader_epoch:
            return ErrorCode.not_leader_or_follower, -1
        return ErrorCode.request_timed_out, self.low_watermark(alive)

    def divergence(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """KIP-320 through fetch: None if a follower whose log ends at `fetch_offset` with a
        batch of `last_fetched_epoch` (-1: none) holds a prefix of ours; else (the epoch, its
        end offset here) to truncate to: the largest epoch we know up to its last one, or -1
        and our log start when we know none that old."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch == last_fetched_epoch and end >= fetch_offset:
            return None
        return epoch, end if epoch >= 0 else self.log.log_start_offset

    def record_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        now: int,
        log_start_offset: int = -1,
        session: FetchSession | None = None,
        *,
        last_fetched_epoch: int = -1,
        broker_epoch: int = -1,
    ) -> tuple[int, int] | None:
        """A follower (at `broker_epoch`) fetched from `fetch_offset`, its last batch of
        `last_fetched_epoch`: it has everything below it; its log starts at
        `log_start_offset` (-1: not said). With `session`, the fetch stands until the session
        says otherwise (`end_standing_fetch`).

        A follower whose log diverged from ours (`divergence`, returned) has not got what its
        fetch offset says: as in Kafka's fetchRecords, such a fetch changes nothing of what the
        leader knows of it, so it can neither move the high watermark nor join the ISR."""
        divergence = self.divergence(fetch_offset, last_fetched_epoch)
        if divergence is not None:
            return divergence
        state = self.followers.setdefault(replica_id, FollowerState())
        state.broker_epoch = broker_epoch
        state.last_caught_up_ms = state.caught_up_ms(self.log.log_end_offset)
        state.session = session
        if log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            self._wake(self._start_waiters)
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now)
        elif fetch_offset >= state.leader_end_at_last_fetch >= 0:
            # It has what we had at its previous fetch: it was caught up then.
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.leader_end_at_last_fetch, state.last_fetch_ms = leader_end, now
        state.log_end_offset = fetch_offset
        self._maybe_expand_isr(replica_id, state)
        self._maybe_advance_high_watermark()
        return None

    def isr_broker_epochs(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        """KIP-903: each member's broker epoch as its fetches gave it, for an AlterPartition of
        `isr`; -1 (not checked) for this leader, whose own the request carries, and for a
        follower that has not fetched in this leader epoch."""
        return tuple(
            -1 if r == self.node_id or r not in self.followers else self.followers[r].broker_epoch
            for r in isr
        )

    def has_standing_fetch(self, replica_id: int, session: FetchSession) -> bool:
        """Whether the follower's progress as known here came from `session`'s standing fetch
        (not when a new leader epoch reset what the leader knows of its followers)."""
        state = self.followers.get(replica_id)
        return state is not None and state.session is session

    def end_standing_fetch(self, replica_id: int, session: FetchSession) -> None:
        """The follower's session dropped this partition or closed: it was caught up until its
        last request if it was at the log end; from now on only new fetches count."""
        state = self.followers.get(replica_id)
        if state is not None and state.session is session:
            state.last_caught_up_ms = state.caught_up_ms(self.log.log_end_offset)
            state.session = None

    def _note_standing_fetches(self) -> None:
        """Before an append moves the log end: followers standing at it were caught up as of
        their last request (Kafka's lastCaughtUpTime = the fetch time of a fetch at the end)."""
        end = self.log.log_end_offset
        for state in self.followers.values():
            if state.session is not None:
                state.last_caught_up_ms = state.caught_up_ms(end)

    def _maybe_expand_isr(self, replica_id: int, state: FollowerState) -> None:
        """A follower that reached the high watermark within this epoch rejoins the ISR."""
        if (
            replica_id in self.isr
            or self.pending_isr is not None
            or state.log_end_offset < max(self.high_watermark, self._epoch_start_offset)
        ):
            return
        self._submit_isr(self, tuple(sorted({*self.isr, replica_id})))

    def lagging_followers(self, now: int, lag_ms: int) -> list[int]:
        """ISR members that have not caught up for longer than replica.lag.time.max.ms."""
        end = self.log.log_end_offset
        return [
            r
            for r in self.isr
            if r != self.node_id
            and now - self.followers.setdefault(r, FollowerState()).caught_up_ms(end) > lag_ms
        ]

    def maybe_shrink_isr(self, now: int, lag_ms: int) -> None:
        if not self.is_leader or self.pending_isr is not None:
            return
        lagging = self.lagging_followers(now, lag_ms)
        if lagging:
            log.info("%r: followers %s are out of sync; shrinking the ISR", self, lagging)
            self._submit_isr(self, tuple(r for r in self.isr if r not in lagging))

    def _maybe_advance_high_watermark(self) -> None:
        if not self.is_leader:
            return
        hw = self.log.log_end_offset
        for r in self.maximal_isr:
            if r != self.node_id:
                follower = self.followers.get(r)
                hw = min(hw, follower.log_end_offset if follower else -1)
        if hw > self.high_watermark:
            self._set_high_watermark(hw)

    def _set_high_watermark(self, hw: int) -> None:
        self.high_watermark = hw
        self.producers.on_high_watermark(hw)
        self._acks.settle(self)
        self._wake(self._hw_waiters)
        self._notify(urgent=False)  # followers learn it with their next answer

    def replication_error(self) -> ErrorCode:
        """Why an acks=all append cannot complete now (NONE if it can)."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if len(self.isr) < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas
        return ErrorCode.none

    def await_replication(
        self, offset: int, leader_epoch: int, wait: ReplicationWait, slot: int
    ) -> None:
        """acks=all: settle `wait`'s `slot` once the high watermark reaches `offset` (see
        acks.py for the codes)."""
        self._acks.add(self, offset, leader_epoch, wait, slot)

    async def wait_for_replication(
        self, offset: int, leader_epoch: int, timeout: float
    ) -> ErrorCode:
        """One write's acks=all wait: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT."""
        wait = ReplicationWait(1)
        self.await_replication(offset, leader_epoch, wait, 0)
        (code,) = await wait.codes(timeout)
        return code

    # -- follower --------------------------------------------------------------------------

    def append_as_follower(self, records: bytes | memoryview) -> AppendResult:
        result = self.log.append_as_follower(records)
        self.producers.update(result.batches)  # so a failover keeps deduplicating retries
        return result

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's high watermark is the leader's, capped by what it has itself."""
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw != self.high_watermark:
            self._set_high_watermark(hw)

    def follow_log_start(self, leader_log_start: int) -> None:
        """A follower's log start follows the leader's (records deleted there, by DeleteRecords
        or retention, go here too), up to its own high watermark (Kafka's
        maybeIncrementLogStartOffset with LeaderOffsetIncremented)."""
        target = min(leader_log_start, self.high_watermark)
        if target > self.log.log_start_offset:
            start = self.delete_records_before(target)
            log.debug("%r: log start follows the leader's to %d", self, start)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.producers.truncate_and_reload(self.log)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.producers.on_high_watermark(self.high_watermark)

    def restart_at(self, offset: int) -> None:
        """Drop the whole log and continue at `offset` (a follower behind the leader's start)."""
        self.log.truncate_fully_and_start_at(offset)
        self.producers.truncate_and_reload(self.log)
        self.high_watermark = offset
        self.producers.on_high_watermark(offset)

    # -- waiting ---------------------------------------------------------------------------

    def watch(self, event: anyio.Event) -> None:
        """Set `event` the next time the high watermark or the log start moves (fetch long
        polls and fetch sessions)."""
        self._hw_waiters.add(event)

    def unwatch(self, event: anyio.Event) -> None:
        self._hw_waiters.discard(event)

    def subscribe(self, session: FetchSession) -> None:
        """Tell `session` of every change a follower's standing fetch may need to answer:
        urgent (appends, log start, leadership) or not (high watermark: the next answer)."""
        self._sessions.add(session)

    def unsubscribe(self, session: FetchSession) -> None:
        self._sessions.discard(session)

    def log_start_moved(self) -> None:
        """Retention moved the log start: followers take it with their next answer, consumers'
        fetch sessions with theirs."""
        self._wake(self._hw_waiters)
        self._notify(urgent=False)

    def _notify(self, urgent: bool) -> None:
        if self._sessions:
            for session in list(self._sessions):
                session.partition_changed(self, urgent)

    @staticmethod
    async def _wait(waiters: set[anyio.Event]) -> None:
        event = anyio.Event()
        waiters.add(event)
        try:
            await event.wait()
        finally:
            waiters.discard(event)

    @staticmethod
    def _wake(waiters: set[anyio.Event]) -> None:
        if waiters:
            for event in list(waiters):
                event.set()
            waiters.clear()

    def close(self) -> None:
        self._acks.fail_all()
        self._wake(self._hw_waiters)
        self._wake(self._start_waiters)
        self._notify(urgent=True)  # sessions find it gone
        self.producers.snapshot()
        self.log.close()
