"""The coordinators' load of an internal partition survives any bytes in it (issue 25).

Whatever a partition of `__consumer_offsets`, `__transaction_state` or `__share_group_state`
holds — a header key that is not UTF-8, truncated records, garbage compressed or not, record
versions nobody knows — the load finishes: what cannot be read is logged and skipped, the
records around it are replayed. An unexpected error while loading one partition fails that
partition's load only (NOT_COORDINATOR for its keys, an ERROR line), never the broker: the
runtime's task group keeps running and loads the other partitions.
"""

from __future__ import annotations

import logging
import re
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.coordinator.record_schemas import OffsetCommitValue
from dataplane.coordinator.records import offset_commit_record
from dataplane.coordinator.runtime import CoordinatorRuntime, InternalTopic, Shard, _Loaded
from dataplane.coordinator.shard import GroupShard
from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.batch import Compression, encode_batch
from dataplane.log.records import Record, build_batch, bytes_field, encode_record, zigzag_varint
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.meta_lease import MetaLease
from dataplane.replica.partition import Partition
from dataplane.replica.producer_state import ProducerStateManager
from dataplane.share.model import SharePartitionKey, ShareState
from dataplane.share.state_coordinator import ShareStateShard
from dataplane.share.state_records import snapshot_key, snapshot_value
from dataplane.transaction import records as txn_records
from dataplane.transaction.shard import TransactionShard
from dataplane.transaction.state import TransactionState, TxnTransitMetadata

from .support import LocalServices

ME = 1
NOW = 1_700_000_000_000


@dataclass(frozen=True)
class Kind:
    """One kind of coordinator shard: its topic, a record it understands (the n-th) and
    whether a shard holds it."""

    topic: str
    new_shard: Callable[[int], Shard]
    record: Callable[[int], tuple[bytes, bytes]]
    has: Callable[[Shard, int], bool]


def _group_shard(index: int) -> GroupShard:
    services = LocalServices()
    return services.attach(GroupShard(index, services))


def _offset(n: int) -> tuple[bytes, bytes]:
    key, value = offset_commit_record("g", "t", n, OffsetCommitValue(100 + n, -1, "", NOW))
    assert value is not None
    return key, value


def _has_offset(shard: Shard, n: int) -> bool:
    assert isinstance(shard, GroupShard)
    _, topics = shard.fetch_offsets("g", [("t", [n])])
    found = topics[0].partitions[0].offset
    return found is not None and found.offset == 100 + n


def _transaction(n: int) -> tuple[bytes, bytes]:
    empty = TxnTransitMetadata(
        n, -1, -1, 0, -1, 60_000, TransactionState.EMPTY, frozenset(), -1, NOW, 0
    )
    return txn_records.encode_key(f"tx{n}"), txn_records.encode_value(empty, 0)


def _has_transaction(shard: Shard, n: int) -> bool:
    assert isinstance(shard, TransactionShard)
    return f"tx{n}" in shard.transactions


def _share_key(n: int) -> SharePartitionKey:
    return SharePartitionKey("g", uuid.UUID(int=n + 1), 0)


def _share_state(n: int) -> tuple[bytes, bytes]:
    return snapshot_key(_share_key(n)), snapshot_value(ShareState(0, 1, n, ()), 0, NOW, NOW)


def _has_share_state(shard: Shard, n: int) -> bool:
    assert isinstance(shard, ShareStateShard)
    return _share_key(n).coordinator_key() in shard.states


KINDS = {
    "groups": Kind("__consumer_offsets", _group_shard, _offset, _has_offset),
    "transactions": Kind(
        "__transaction_state", lambda i: TransactionShard(i, 1), _transaction, _has_transaction
    ),
    "share-state": Kind(
        "__share_group_state", lambda i: ShareStateShard(i, 1), _share_state, _has_share_state
    ),
}


def _batch(body: bytes, count: int, codec: int = Compression.NONE) -> bytes:
    """A batch around `body` as its records (compressed with `codec`, it says), whatever they
    are: its CRC is right, and the append checks no record, as produce does not."""
    return encode_batch(
        body,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=codec,
        last_offset_delta=max(count - 1, 0),
        base_timestamp=NOW,
        max_timestamp=NOW,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
    )


def _with_header(key: bytes, value: bytes, header_key: bytes) -> bytes:
    """A one-record batch whose record has one header named by `header_key`'s bytes."""
    body = bytes_field(key) + bytes_field(value) + zigzag_varint(1)
    body += bytes_field(header_key) + bytes_field(b"v")
    return _batch(encode_record(0, 0, body), 1)


class Leader:
    """One broker leading partitions 0..n-1 of an internal topic, its runtime not started."""

    def __init__(self, directory: Path, kind: Kind, partitions: int = 1) -> None:
        self.store = StateStore(directory / "state")
        self.partitions: dict[tuple[str, int], Partition] = {}
        for index in range(partitions):
            path = directory / f"{kind.topic}-{index}"
            plog = PartitionLog.open(path, LogConfig(), self.store, path.name)
            partition = Partition(
                kind.topic, b"\x04" * 16, index, plog, ProducerStateManager.load(plog), ME, _no_isr
            )
            partition.update(PartitionInfo(index, (ME,), (ME,), ME, 1, 1))
            self.partitions[(kind.topic, index)] = partition
        replicas = SimpleNamespace(
            leadership_listeners=[], partitions=self.partitions, meta_lease=MetaLease(9000, 2000)
        )
        cache = SimpleNamespace(topics={}, topic_listeners=[])
        topic = InternalTopic(cache, _no_create, kind.topic, partitions, 1, {})  # type: ignore[arg-type]
        self.runtime: CoordinatorRuntime[Shard] = CoordinatorRuntime(
            replicas,  # type: ignore[arg-type]
            topic,
            kind.new_shard,
        )

    def append(self, index: int, *batches: bytes) -> None:
        partition = self.partitions[(self.runtime.topic.name, index)]
        for batch in batches:
            partition.append(batch, NOW)

    async def load(self, index: int = 0) -> Shard:
        """Load one partition as a new leadership does; the shard once loaded."""
        partition = self.partitions[(self.runtime.topic.name, index)]
        loaded = _Loaded(self.runtime._new_shard(index), partition.leader_epoch)
        self.runtime._shards[index] = loaded
        await self.runtime._load(partition, loaded)  # type: ignore[arg-type]
        assert loaded.ready.is_set(), "the load did not finish"
        return loaded.shard

    def close(self) -> None:
        for partition in self.partitions.values():
            partition.close()
        self.store.close()


def _no_isr(partition: Partition, isr: tuple[int, ...]) -> None:
    raise AssertionError("no ISR change expected")


async def _no_create(topics: object) -> list[object]:
    raise AssertionError("no topic creation expected")


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]


@pytest.fixture
def leader(tmp_path: Path, kind: Kind) -> Iterator[Leader]:
    broker = Leader(tmp_path, kind)
    yield broker
    broker.close()


def test_a_header_key_that_is_not_utf8_is_read_as_java_reads_it(leader: Leader, kind: Kind) -> None:
    """Today's crash: the header key's UnicodeDecodeError ended the broker. Kafka decodes a
    header key as Java's String(bytes, UTF_8) does (malformed bytes become U+FFFD), and a
    coordinator ignores headers: the record is replayed like any other."""
    leader.append(0, build_batch([kind.record(0)], NOW))
    leader.append(0, _with_header(*kind.record(1), b"\xff\xfe\x80"))
    leader.append(0, build_batch([kind.record(2)], NOW))

    shard = anyio.run(leader.load)

    assert all(kind.has(shard, n) for n in range(3))


def _truncated_record(key: bytes, value: bytes) -> bytes:
    record = encode_record(0, 0, bytes_field(key) + bytes_field(value) + zigzag_varint(0))
    return _batch(record[: len(record) // 2], 1)


def _fewer_records_than_counted(key: bytes, value: bytes) -> bytes:
    record = encode_record(0, 0, bytes_field(key) + bytes_field(value) + zigzag_varint(0))
    return _batch(record, 3)


def _garbage_gzip(key: bytes, value: bytes) -> bytes:
    return _batch(b"\x1f\x8b not gzip at all" + key + value, 1, Compression.GZIP)


def _unknown_versions(key: bytes, value: bytes) -> bytes:
    # a key and a value at version 0x7f7f: a newer broker's records, or nonsense
    return build_batch([(b"\x7f\x7f" + key[2:], b"\x7f\x7f" + value[2:])], NOW)


def _huge_lengths(key: bytes, value: bytes) -> bytes:
    body = zigzag_varint(1 << 40) + bytes_field(value) + zigzag_varint(-5)
    return _batch(encode_record(0, 0, body), 1)


BAD_BATCHES = [
    _truncated_record,
    _fewer_records_than_counted,
    _garbage_gzip,
    _unknown_versions,
    _huge_lengths,
]


@pytest.mark.parametrize("bad", BAD_BATCHES)
def test_unreadable_records_are_logged_and_skipped(
    leader: Leader,
    kind: Kind,
    bad: Callable[[bytes, bytes], bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    leader.append(0, build_batch([kind.record(0)], NOW))
    leader.append(0, bad(*kind.record(1)))  # at offset 1
    leader.append(0, build_batch([kind.record(2)], NOW))

    with caplog.at_level(logging.WARNING):
        shard = anyio.run(leader.load)

    assert kind.has(shard, 0)
    assert kind.has(shard, 2)
    # the partition and the offset of what was skipped (in the bad batch, from offset 1) are
    # named
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    skipped = [re.search(rf"{kind.topic}-0: skipped .* at offset (\d+)", line) for line in lines]
    assert [int(m.group(1)) for m in skipped if m and int(m.group(1)) >= 1], lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.binary(max_size=120),
    count=st.integers(1, 12),  # the append refuses a batch of no record
    codec=st.sampled_from([int(c) for c in Compression]),
    kind_name=st.sampled_from(sorted(KINDS)),
)
def test_any_bytes_in_a_batch_never_stop_the_load(
    body: bytes, count: int, codec: int, kind_name: str
) -> None:
    kind = KINDS[kind_name]
    with tempfile.TemporaryDirectory() as directory:
        leader = Leader(Path(directory), kind)
        try:
            leader.append(0, build_batch([kind.record(0)], NOW))
            leader.append(0, _batch(body, count, codec))
            leader.append(0, build_batch([kind.record(2)], NOW))
            shard = anyio.run(leader.load)
            assert kind.has(shard, 0)
            assert kind.has(shard, 2)
        finally:
            leader.close()


class _Exploding:
    """A shard whose replay fails as a bug would, on one partition only."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.replayed = 0
        self.unloaded = False

    def replay(self, record: Record) -> None:
        if self.index == 0:
            raise RuntimeError("a bug in replay")
        self.replayed += 1

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        self.unloaded = True


def test_an_unexpected_error_fails_that_partitions_load_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kind = Kind("__consumer_offsets", _Exploding, _offset, lambda shard, n: True)
    leader = Leader(tmp_path, kind, partitions=2)
    for index in (0, 1):
        leader.append(index, build_batch([kind.record(index)], NOW))
    runtime = leader.runtime
    # a key of each partition
    keys = {runtime.topic.partition_for(f"group-{i}"): f"group-{i}" for i in range(20)}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run)
            with anyio.fail_after(10):
                while runtime.is_loading() or len(runtime._shards) < 2:
                    await anyio.sleep(0.01)
            # partition 1 serves; partition 0's keys are NOT_COORDINATOR, as in Kafka's FAILED
            # state (a client finds the coordinator again and retries)
            loaded = runtime.shard(keys[1])
            assert isinstance(loaded, _Exploding)
            assert loaded.replayed == 1
            with pytest.raises(KafkaError) as failed:
                runtime.shard(keys[0])
            assert failed.value.code == ErrorCode.not_coordinator
            with pytest.raises(KafkaError) as refused:
                runtime.append(keys[0], [(b"k", b"v")])
            assert refused.value.code == ErrorCode.not_coordinator
            assert runtime._shards[0].shard.unloaded  # type: ignore[attr-defined]
            tg.cancel_scope.cancel()  # the runtime was still running: the broker lives on

    with caplog.at_level(logging.ERROR):
        try:
            anyio.run(main)
        finally:
            leader.close()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "__consumer_offsets-0" in errors[0].getMessage()
    assert "a bug in replay" in errors[0].getMessage()


def test_a_leadership_after_the_runtime_stopped_loads_nothing(tmp_path: Path) -> None:
    """At a broker's shutdown its runtimes' task groups end before its metadata watcher does:
    a partition led anew after that (another broker shutting down too) used to start a load
    on the closed task group, whose RuntimeError ended the broker with a traceback."""
    leader = Leader(tmp_path, KINDS["groups"])
    runtime = leader.runtime
    partition = leader.partitions[(runtime.topic.name, 0)]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run)
            with anyio.fail_after(10):
                while runtime.is_loading() or not runtime._shards:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()  # the broker stops

    try:
        anyio.run(main)
        partition.update(PartitionInfo(0, (ME,), (ME,), ME, 2, 2))  # led at a new epoch
        runtime._on_leadership(partition)
    finally:
        leader.close()
    assert runtime._shards[0].leader_epoch == 1  # the stopped runtime took on nothing new
