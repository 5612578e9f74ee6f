"""`python_driver.py <client> group-consume|describe-group|committed|commit ...`: one member of
a consumer group, and a group's offsets seen from outside (README.md, "Consumer groups"), for
confluent-kafka, kafka-python and aiokafka."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from drivers import EXIT_UNSUPPORTED
from python_driver import (
    confluent_error_name,
    confluent_security,
    emit,
    error_name,
    event,
    fail,
    final_failure,
    located,
    parse_ints,
    parse_pairs,
    parse_seeks,
    python_settings,
    s,
)


class Member:
    """Client-independent part of group-consume: when to stop, the --seek and --pause script
    (resumed by a ``resume`` line on stdin), what was processed (next offset per partition) and
    the events."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.stop = threading.Event()
        self.resume_asked = threading.Event()
        self.started = time.monotonic()
        self.records = 0
        self.owned: set[int] = set()
        self.next: dict[int, int] = {}  # partition -> offset after the last processed record
        self.seeks = parse_seeks(a.seek)
        self.pause = parse_ints(a.pause)
        self.paused: list[int] = []
        self.pause_state = "pending" if self.pause else "done"  # -> paused -> done
        if a.stop_on_eof == "true":
            threading.Thread(target=self._watch_stdin, daemon=True).start()

    def _watch_stdin(self) -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
            if line.strip() == "resume":
                self.resume_asked.set()
        self.stop.set()

    def done(self) -> bool:
        a = self.a
        return (
            self.stop.is_set()
            or (a.max_records > 0 and self.records >= a.max_records)
            or (a.duration > 0 and time.monotonic() - self.started >= a.duration)
        )

    def assigned(
        self,
        parts,
        owned,
        pause: Callable[[list[int]], None],
        generation=None,
        member_id=None,
    ) -> None:
        """Reports an assignment, and pauses (with the client's ``pause``) what --pause wants
        paused once it is assigned."""
        self.owned = set(owned)
        event(
            "assigned",
            partitions=sorted(parts),
            owned=sorted(owned),
            generation=generation,
            member_id=member_id,
        )
        if self.pause_state == "pending" and self.pause & set(parts):
            self.pause_state = "paused"
            self.paused = sorted(self.pause & set(parts))
            pause(self.paused)
            event("paused", partitions=self.paused)

    def revoked(self, parts, owned, lost: bool = False) -> None:
        self.owned = set(owned)
        for p in parts:
            self.next.pop(p, None)
        event("lost" if lost else "revoked", partitions=sorted(parts), owned=sorted(owned))

    def seek_target(self, partition: int, offset: int) -> int | None:
        """--seek: the offset to seek to when this is the record the partition's seek waits
        for (None: no seek). A seek to the record's own offset only reports it."""
        target, at = self.seeks.get(partition, (None, None))
        if target is None or at not in (None, offset):
            return None
        del self.seeks[partition]
        event("seek", partition=partition, offset=target, at=offset)
        return None if target == offset else target

    def stall_ms(self) -> float:
        """Processing time of the next record: --process-ms, plus --stall-ms for the
        --stall-at'th record (a consumer stuck in processing)."""
        stall = self.a.stall_ms if self.records + 1 == self.a.stall_at else 0
        return self.a.process_ms + stall

    def processed(self, partition: int, offset: int, key: bytes | None) -> None:
        self.records += 1
        self.next[partition] = offset + 1
        event("record", partition=partition, offset=offset, key=s(key))

    def resume_if_asked(self, resume: Callable[[list[int]], None]) -> None:
        """Resumes the paused partitions (with the client's ``resume``) once stdin said so;
        called from the poll loop, the thread that owns the consumer."""
        if self.pause_state == "paused" and self.resume_asked.is_set():
            self.pause_state = "done"
            resume(self.paused)
            event("resumed", partitions=self.paused)

    def commit_due(self) -> bool:
        return self.a.commit == "offsets" and self.records % self.a.commit_every == 0

    def to_commit(self) -> dict[int, int]:
        """Processed positions of the owned partitions (what sync/async commit)."""
        return {p: o for p, o in self.next.items() if p in self.owned}


def commit_event(via: str, offsets: dict, error: str | None, errors: dict | None = None) -> None:
    fields = {"via": via, "offsets": {str(p): o for p, o in sorted(offsets.items())}}
    event("commit", **fields, error=error, partition_errors=errors or {})


# The duration options (seconds), by their argparse names.
DURATIONS = ["auto_commit_interval", "session_timeout", "heartbeat_interval", "max_poll_interval"]


def ms_settings(a: argparse.Namespace, options: list[str], sep: str) -> dict[str, int]:
    """The duration options given, in milliseconds, under the client's names for them:
    ``session_timeout`` -> librdkafka's ``session.timeout.ms`` (sep "."), kafka-python's and
    aiokafka's ``session_timeout_ms`` (sep "_")."""
    return {
        f"{o.replace('_', sep)}{sep}ms": int(getattr(a, o) * 1000) for o in options if getattr(a, o)
    }


def confluent_group(cmd: str, a: argparse.Namespace) -> None:  # noqa: C901 - a driver: one branch per command
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    base = {"bootstrap.servers": a.bootstrap} | confluent_security()
    if os.environ.get("RAFKA_CLIENT_LOG", "").upper() == "DEBUG":
        base["debug"] = "cgrp,consumer,protocol"  # librdkafka's group debug, on our stderr
    if cmd == "describe-group":
        admin = AdminClient(base)
        d = admin.describe_consumer_groups([a.group], request_timeout=a.timeout)[a.group]
        try:
            g = d.result(a.timeout)
        except KafkaException as e:
            emit({"group": a.group, "error": error_name(e)})
            return
        emit(
            {
                "group": g.group_id,
                "error": None,
                "state": state_name(g.state.name),
                "type": getattr(getattr(g, "type", None), "name", None),
                "protocol": g.partition_assignor,
                "coordinator": g.coordinator.id if g.coordinator else None,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "partitions": sorted(
                            [tp.topic, tp.partition] for tp in m.assignment.topic_partitions
                        ),
                    }
                    for m in g.members
                ],
            }
        )
        return
    if cmd == "committed":
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = AdminClient(base)
        parts = admin.list_topics(a.topic, timeout=a.timeout).topics[a.topic].partitions
        req = [ConsumerGroupTopicPartitions(a.group, [TopicPartition(a.topic, p) for p in parts])]
        res = admin.list_consumer_group_offsets(req, request_timeout=a.timeout)[a.group]
        try:
            got = res.result(a.timeout)
        except KafkaException as e:
            fail(f"committed: {e}")
        emit({str(tp.partition): max(tp.offset, -1) for tp in sorted(got.topic_partitions)})
        return
    if cmd == "commit":
        if a.member_id is not None or a.generation is not None:
            print("confluent: no API commits with a chosen member id/generation", file=sys.stderr)
            sys.exit(EXIT_UNSUPPORTED)
        # A consumer that is not a group member (generation -1, no member id), like assign().
        c = Consumer(base | {"group.id": a.group, "enable.auto.commit": False})
        offs = [TopicPartition(a.topic, p, o) for p, o in parse_pairs(a.offsets).items()]
        try:
            answered = c.commit(offsets=offs, asynchronous=False)
            errs = {str(tp.partition): tp.error.name() if tp.error else None for tp in answered}
            top = next((e for e in errs.values() if e), None)
        except KafkaException as e:
            top, errs = error_name(e), {}
        c.close()
        emit({"error": top, "partitions": errs})
        return

    # group-consume
    m = Member(a)
    conf = base | {
        "group.id": a.group,
        "auto.offset.reset": a.offset_reset,
        "enable.auto.commit": a.commit == "auto",
        # Offsets are stored for auto-commit only once a record is processed (at least once).
        "enable.auto.offset.store": False,
    }
    conf |= ms_settings(a, ["auto_commit_interval", "max_poll_interval"], ".")
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    if a.protocol == "consumer":
        # KIP-848: the broker assigns; session/heartbeat timeouts are the broker's settings.
        conf["group.protocol"] = "consumer"
        if a.assignor:
            conf["group.remote.assignor"] = a.assignor
    else:
        conf |= ms_settings(a, ["session_timeout", "heartbeat_interval"], ".")
        if a.assignor:
            conf["partition.assignment.strategy"] = a.assignor

    def on_commit(err: KafkaError | None, parts: list) -> None:
        if err is not None and err.code() == KafkaError._NO_OFFSET:
            return
        errs = {str(tp.partition): tp.error.name() for tp in parts if tp.error}
        commit_event(
            "callback",
            {tp.partition: tp.offset for tp in parts},
            err.name() if err else next(iter(errs.values()), None),
            errs,
        )

    conf["on_commit"] = on_commit

    def on_error(err: KafkaError) -> None:
        name = confluent_error_name(err)
        if name == "SASL_AUTHENTICATION_FAILED":
            final_failure(name, err.str())
        event("error", error=name, message=err.str())

    conf["error_cb"] = on_error
    c = Consumer(conf)

    def tps(parts) -> list:
        return [TopicPartition(a.topic, p) for p in parts]

    def commit_sync(offsets: dict[int, int], via: str) -> None:
        if not offsets:
            return
        try:
            res = c.commit(
                offsets=[TopicPartition(a.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
            errs = {str(tp.partition): tp.error.name() for tp in res if tp.error}
            commit_event(
                via, {tp.partition: tp.offset for tp in res}, next(iter(errs.values()), None), errs
            )
        except KafkaException as e:
            commit_event(via, offsets, error_name(e))

    # Incremental (cooperative) rebalancing: KIP-848 and the cooperative-sticky assignor.
    cooperative = a.protocol == "consumer" or a.assignor == "cooperative-sticky"

    # What the member owns is the driver's own account of its assign/unassign calls: asking
    # librdkafka (assignment()) from a rebalance callback that close() triggered can block
    # forever in the client (an op its terminating group handle never answers).
    def on_assign(consumer, parts) -> None:
        consumer.incremental_assign(parts) if cooperative else consumer.assign(parts)
        ps = {tp.partition for tp in parts}
        m.assigned(
            sorted(ps),
            (m.owned | ps) if cooperative else ps,
            lambda ps: consumer.pause(tps(ps)),
            member_id=consumer.memberid(),
        )

    # Set once the loop has committed its offsets ("close"): the last revoke commits nothing
    # more (see the end of the loop).
    closing = False

    def on_revoke(consumer, parts, lost: bool = False) -> None:
        ps = [tp.partition for tp in parts]
        if not lost and not closing and a.commit in ("sync", "async"):
            commit_sync({p: o for p, o in m.to_commit().items() if p in ps}, "revoke")
        consumer.incremental_unassign(parts) if cooperative else consumer.unassign()
        m.revoked(ps, (m.owned - set(ps)) if cooperative else set(), lost)

    c.subscribe(
        [a.topic],
        on_assign=on_assign,
        on_revoke=on_revoke,
        on_lost=lambda consumer, parts: on_revoke(consumer, parts, lost=True),
    )
    while not m.done():
        m.resume_if_asked(lambda ps: c.resume(tps(ps)))
        msgs = c.consume(100, 0.2)
        skip: set[int] = set()
        processed_any = False
        for msg in msgs:
            err = msg.error()
            if err is not None:
                event("error", error=err.name(), message=err.str())
                if err.fatal():
                    fail(f"fatal: {err}")
                continue
            p, o = located(msg)
            if p in skip:
                continue
            target = m.seek_target(p, o)
            if target is not None:
                c.seek(TopicPartition(a.topic, p, target))
                skip.add(p)  # the rest of this batch is from before the seek
                continue
            if m.stall_ms():
                time.sleep(m.stall_ms() / 1000)
            m.processed(p, o, msg.key())
            processed_any = True
            if a.commit == "auto":
                c.store_offsets(msg)
            elif m.commit_due():
                commit_sync({p: o + 1}, "offsets")
            if m.done():
                break
        if processed_any and a.commit == "sync":
            commit_sync(m.to_commit(), "sync")
        elif processed_any and a.commit == "async":
            offsets = m.to_commit()
            c.commit(
                offsets=[TopicPartition(a.topic, p, o) for p, o in offsets.items()],
                asynchronous=True,
            )
    if a.commit in ("sync", "async"):
        commit_sync(m.to_commit(), "close")
    closing = True
    if a.instance_id is None:
        # A dynamic member hands its partitions back before close(), serving the revoke itself.
        # With a rebalance pending when close() starts, librdkafka leaves the group (resetting
        # its member id) before that revoke runs, and may terminate the handle while the
        # callback's unassign() is on its way, which then hangs forever (librdkafka 2.16, seen
        # in CI; the revoke's commit, then refused with UNKNOWN_MEMBER_ID, made it likely).
        # A static member must not leave (KIP-345): it closes at once.
        c.unsubscribe()
        deadline = time.monotonic() + 10
        while m.owned and time.monotonic() < deadline:
            c.consume(100, 0.1)  # what it returns now is left to the next owner
    c.close()  # a static member stays in the group; auto-commit commits the stored offsets
    event("closed", records=m.records)


def state_name(s: str) -> str:
    """Group state as Kafka spells it (Stable, PreparingRebalance, ...)."""
    fixed = {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }
    return fixed.get(s) or "".join(w.capitalize() for w in s.split("_"))


def consumer_settings(a: argparse.Namespace, assignors: dict[str, type], client: str) -> dict:
    """kafka-python's and aiokafka's group consumer settings (the two share the names)."""
    kw: dict = python_settings(a, client) | dict(
        group_id=a.group,
        auto_offset_reset=a.offset_reset,
        enable_auto_commit=a.commit == "auto",
    )
    kw |= ms_settings(a, DURATIONS, "_")
    if a.instance_id:
        kw["group_instance_id"] = a.instance_id
    if a.assignor:
        kw["partition_assignment_strategy"] = (assignors[a.assignor],)
    return kw


def to_process(
    m: Member, batches: dict, owns: Callable[[object], bool], seek: Callable[[object, int], None]
) -> Iterator[tuple]:
    """(partition, record) of a kafka-python or aiokafka poll that are to be processed. At a
    stop, a partition's first unprocessed record is sought back to (auto-commit must not pass
    it); at a --seek the rest of the partition's batch is from before it. ``owns``: whether the
    partition is still assigned (the rebalance runs on another thread / task)."""
    for part, msgs in batches.items():
        for msg in msgs:
            if m.done():
                if owns(part):
                    seek(part, msg.offset)
                break
            target = m.seek_target(part.partition, msg.offset)
            if target is not None:
                if owns(part):
                    seek(part, target)
                break
            yield part, msg


def kafka_python_pending_join_fix() -> None:
    """kafka-python 3.0.12 can drop out of its group for good: when a poll's timeout ends
    while its JoinGroup/SyncGroup is in flight, the next poll only goes back to that join if
    ``need_rejoin()`` is still true. A leader that rejoins because the metadata it assigned
    with changed (its first assignment ran before it knew the topic: empty) sets that metadata
    as assigned in its own ``_perform_assignment``, so ``need_rejoin()`` turns false before the
    join is finished: the SyncGroup answer is never applied, no partitions are assigned and,
    the heartbeat being off during a join, the coordinator expires the member after the
    session timeout without the member noticing. Java's ``rejoinNeededOrPending()`` (and
    kafka-python before 3.0) also counts a join in flight; so does this. The join is then
    sent again (kafka-python drops the finished one), which the coordinator answers as any
    rejoin."""
    from kafka.coordinator.consumer import ConsumerCoordinator

    need_rejoin = ConsumerCoordinator.need_rejoin
    if getattr(need_rejoin, "counts_pending_join", False):
        return

    def need_rejoin_or_pending(self: ConsumerCoordinator) -> bool:
        return need_rejoin(self) or getattr(self, "_join_task", None) is not None

    need_rejoin_or_pending.counts_pending_join = True  # type: ignore[attr-defined]
    ConsumerCoordinator.need_rejoin = need_rejoin_or_pending  # type: ignore[method-assign]


def kafka_python_group(cmd: str, a: argparse.Namespace) -> None:  # noqa: C901 - a driver: one branch per command
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    if cmd in ("describe-group", "committed"):
        print(f"kafka-python: {cmd} is done with confluent here", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    if cmd == "commit":
        commit_kafka_python(a)
        return
    if a.protocol == "consumer":
        print("kafka-python has no KIP-848 consumer protocol", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)

    m = Member(a)
    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    try:
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

        assignors["cooperative-sticky"] = CooperativeStickyAssignor
    except ImportError:
        pass
    kafka_python_pending_join_fix()
    c = KafkaConsumer(**consumer_settings(a, assignors, "kafka-python"))

    def tp(p: int) -> TopicPartition:
        return TopicPartition(a.topic, p)

    def commit_sync(offsets: dict[int, int], via: str) -> None:
        if not offsets:
            return
        try:
            c.commit({tp(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
            commit_event(via, offsets, None)
        except Exception as e:
            commit_event(via, offsets, error_name(e))

    def generation() -> tuple:
        md = c.group_metadata()
        return getattr(md, "generation_id", None), getattr(md, "member_id", None)

    class Listener(ConsumerRebalanceListener):
        # kafka-python runs these on its IO thread.
        def on_partitions_assigned(self, assigned) -> None:
            gen, member_id = generation()
            owned = [x.partition for x in c.assignment()]
            m.assigned(
                [x.partition for x in assigned],
                owned,
                lambda ps: c.pause(*map(tp, ps)),
                gen,
                member_id,
            )

        def on_partitions_revoked(self, revoked) -> None:
            # No commit here: kafka-python refuses a blocking commit on its IO thread.
            ps = [x.partition for x in revoked]
            if ps:
                m.revoked(ps, [x.partition for x in c.assignment() if x.partition not in ps])

        def on_partitions_lost(self, lost) -> None:
            ps = [x.partition for x in lost]
            m.revoked(ps, [x.partition for x in c.assignment() if x.partition not in ps], True)

    c.subscribe([a.topic], listener=Listener())

    def on_async_commit(offsets: dict, response: object) -> None:
        err = error_name(response) if isinstance(response, BaseException) else None
        commit_event("callback", {k.partition: v.offset for k, v in offsets.items()}, err)

    while not m.done():
        m.resume_if_asked(lambda ps: c.resume(*map(tp, ps)))
        batches = c.poll(timeout_ms=200, max_records=100)
        processed_any = False
        for part, msg in to_process(m, batches, lambda x: x in c.assignment(), c.seek):
            if m.stall_ms():
                time.sleep(m.stall_ms() / 1000)
            m.processed(part.partition, msg.offset, msg.key)
            processed_any = True
            if m.commit_due():
                commit_sync({part.partition: msg.offset + 1}, "offsets")
        if processed_any and a.commit == "sync":
            commit_sync(m.to_commit(), "sync")
        elif processed_any and a.commit == "async":
            offsets = m.to_commit()
            c.commit_async(
                {tp(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                callback=on_async_commit,
            )
    if a.commit in ("sync", "async"):
        commit_sync(m.to_commit(), "close")
    c.close(autocommit=a.commit == "auto")
    event("closed", records=m.records)


def commit_kafka_python(a) -> None:
    """commit: OffsetCommit from kafka-python's admin client. Without --member-id it is
    alter_group_offsets (generation -1, no member id); with it, kafka-python's own
    OffsetCommitRequest carries the given member id, generation and instance id."""
    from kafka import OffsetAndMetadata, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import for_code
    from kafka.protocol.consumer import OffsetCommitRequest

    admin = KafkaAdminClient(**python_settings(a, "kafka-python"))
    offsets = parse_pairs(a.offsets)
    try:
        if a.member_id is None and a.generation is None:
            res = admin.alter_group_offsets(
                a.group,
                {
                    TopicPartition(a.topic, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()
                },
            )
            errs = {str(k.partition): (None if v.errno == 0 else v.message) for k, v in res.items()}
        else:
            request_topic = OffsetCommitRequest.OffsetCommitRequestTopic
            request_partition = request_topic.OffsetCommitRequestPartition
            request = OffsetCommitRequest(
                max_version=8,
                group_id=a.group,
                generation_id_or_member_epoch=-1 if a.generation is None else a.generation,
                member_id=a.member_id or "",
                group_instance_id=a.instance_id,
                retention_time_ms=-1,
                topics=[
                    request_topic(
                        name=a.topic,
                        partitions=[
                            request_partition(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for p, o in offsets.items()
                        ],
                    )
                ],
            )

            async def send():
                node = await admin._find_coordinator_id(a.group)
                return await admin._manager.send(request, node_id=node)

            response = admin._manager.run(send)
            errs = {}
            for t in response.topics:
                for part in t.partitions:
                    err = for_code(part.error_code)
                    errs[str(part.partition_index)] = None if part.error_code == 0 else err.message
        top = next((e for e in errs.values() if e), None)
    except Exception as e:  # e.g. FindCoordinator's INVALID_GROUP_ID
        top, errs = error_name(e), {}
    finally:
        admin.close()
    emit({"error": top, "partitions": errs})


async def aiokafka_group(cmd: str, a: argparse.Namespace) -> None:  # noqa: C901 - a driver: one branch per command
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.structs import OffsetAndMetadata

    if cmd in ("describe-group", "committed", "commit"):
        print(f"aiokafka: {cmd} is done with confluent/kafka-python here", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    if a.protocol == "consumer":
        print("aiokafka has no KIP-848 consumer protocol", file=sys.stderr)
        sys.exit(EXIT_UNSUPPORTED)
    m = Member(a)
    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    try:
        from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
            StickyPartitionAssignor,
        )

        assignors["sticky"] = StickyPartitionAssignor
    except ImportError:
        pass
    c = AIOKafkaConsumer(**consumer_settings(a, assignors, "aiokafka"))

    def tp(p: int) -> TopicPartition:
        return TopicPartition(a.topic, p)

    async def commit_sync(offsets: dict[int, int], via: str) -> None:
        if not offsets:
            return
        try:
            await c.commit({tp(p): OffsetAndMetadata(o, "") for p, o in offsets.items()})
            commit_event(via, offsets, None)
        except Exception as e:
            commit_event(via, offsets, error_name(e))

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, assigned) -> None:
            coord = c._coordinator
            owned = [x.partition for x in c.assignment()]
            m.assigned(
                [x.partition for x in assigned],
                owned,
                lambda ps: c.pause(*map(tp, ps)),
                getattr(coord, "generation", None),
                getattr(coord, "member_id", None),
            )

        async def on_partitions_revoked(self, revoked) -> None:
            ps = [x.partition for x in revoked]
            if not ps:
                return
            # No commit here: aiokafka's commit() inside the revocation fails (CommitFailedError)
            # and the member then never rejoins; sync mode has committed after each batch.
            m.revoked(ps, [])  # aiokafka is eager only: everything goes

    await c.start()
    c.subscribe([a.topic], listener=Listener())
    try:
        while not m.done():
            m.resume_if_asked(lambda ps: c.resume(*map(tp, ps)))
            batches = await c.getmany(timeout_ms=200, max_records=100)
            processed_any = False
            for part, msg in to_process(m, batches, lambda x: x in c.assignment(), c.seek):
                if m.stall_ms():
                    await asyncio.sleep(m.stall_ms() / 1000)
                m.processed(part.partition, msg.offset, msg.key)
                processed_any = True
                if m.commit_due():
                    await commit_sync({part.partition: msg.offset + 1}, "offsets")
            if processed_any and a.commit in ("sync", "async"):
                await commit_sync(m.to_commit(), "sync")
        if a.commit in ("sync", "async"):
            await commit_sync(m.to_commit(), "close")
    finally:
        await c.stop()  # leaves the group; commits consumed offsets when auto-committing
    event("closed", records=m.records)


GROUP_CLIENTS: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "confluent": confluent_group,
    "kafka-python": kafka_python_group,
    "aiokafka": lambda cmd, a: asyncio.run(aiokafka_group(cmd, a)),
}
