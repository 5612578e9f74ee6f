"""The persister's routing and retries: this broker's coordinator called directly, another's
through its `ShareState` stub, NOT_COORDINATOR and friends retried (on the next metadata change
or a backoff) until the deadline, other errors at once, the last error raised with where the
coordinator should have been."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState, StateBatch
from dataplane.share.persister import SharePersister
from dataplane.share.state_rpc import ShareStateRpcHandlers, key_from_proto, state_from_proto
from proto import replication_pb2

E = ErrorCode
ME = 1
KEY = SharePartitionKey("g", uuid.UUID(int=9), 2)
STATE = ShareState(1, 3, 40, (StateBatch(40, 41, DeliveryState.ARCHIVED, 5),))


class Cache:
    """The metadata offset, moved by the test (a new leader)."""

    def __init__(self) -> None:
        self.offset = 0
        self._changed = anyio.Event()

    def bump(self) -> None:
        self.offset += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, predicate: Any, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while not predicate():
                await self._changed.wait()
            return True
        return False


class Topic:
    """Where the key's coordinator is: a script of answers, the last one repeated."""

    name = "__share_group_state"

    def __init__(self, *answers: int | ErrorCode) -> None:
        self.answers = list(answers)
        self.asked = 0

    def partition_for(self, key: str) -> int:
        return 7

    async def coordinator(self, key: str) -> int:
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, ErrorCode):
            raise KafkaError(answer)
        return answer


class Coordinator:
    """This broker's share coordinator: records calls, answers from a script of errors."""

    def __init__(self, topic: Topic, *errors: ErrorCode) -> None:
        self.topic = topic
        self.errors = list(errors)
        self.calls: list[tuple[str, Any]] = []

    async def _do(self, name: str, arg: Any, result: Any) -> Any:
        self.calls.append((name, arg))
        if self.errors:
            raise KafkaError(self.errors.pop(0))
        return result

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        return await self._do("read", (key, leader_epoch), STATE)

    async def write(self, key: SharePartitionKey, state: ShareState) -> None:
        await self._do("write", (key, state), None)

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> ShareState:
        return await self._do(
            "initialize", (key, start_offset), ShareState(0, -1, start_offset, ())
        )

    async def delete(self, key: SharePartitionKey) -> None:
        await self._do("delete", key, None)

    async def summary(self, key: SharePartitionKey) -> ShareState | None:
        return await self._do("summary", key, None)


class Peers:
    """Other brokers: each stub is the real servicer over that broker's coordinator, called
    with the request messages as gRPC would deliver them (serialized and parsed)."""

    def __init__(self, brokers: dict[int, Coordinator]) -> None:
        self.brokers = brokers
        self.called: list[int] = []

    def stub(self, broker_id: int, stub_type: Any) -> Any:
        if broker_id not in self.brokers:
            raise KafkaError(E.broker_not_available)
        self.called.append(broker_id)
        handlers = ShareStateRpcHandlers(self.brokers[broker_id])  # type: ignore[arg-type]

        def method(name: str) -> Any:
            async def call(request: Any, timeout: float) -> replication_pb2.ShareStateResponse:
                assert timeout > 0
                wire = type(request).FromString(request.SerializeToString())
                response = await getattr(handlers, name)(wire, None)
                return replication_pb2.ShareStateResponse.FromString(response.SerializeToString())

            return call

        return SimpleNamespace(
            **{n: method(n) for n in ("Read", "Write", "Initialize", "Delete", "Summary")}
        )

    async def close(self) -> None:
        pass


def persister(
    topic: Topic, local: Coordinator, peers: Peers, cache: Cache | None = None, timeout: float = 5.0
) -> SharePersister:
    return SharePersister(ME, cache or Cache(), topic, peers, local, timeout)  # type: ignore[arg-type]


def test_local_coordinator_is_called_directly() -> None:
    topic = Topic(ME)
    local = Coordinator(topic)
    peers = Peers({})
    p = persister(topic, local, peers)

    async def main() -> None:
        assert await p.read(KEY, 3) == STATE
        await p.write(KEY, STATE)
        assert await p.initialize(KEY, 7) == ShareState(0, -1, 7, ())
        await p.delete(KEY)
        assert await p.summary(KEY) is None

    anyio.run(main)
    assert [name for name, _ in local.calls] == ["read", "write", "initialize", "delete", "summary"]
    assert peers.called == []


def test_remote_coordinator_through_its_stub() -> None:
    topic = Topic(2)
    remote = Coordinator(topic)
    peers = Peers({2: remote})
    p = persister(topic, Coordinator(topic), peers)

    async def main() -> None:
        assert await p.read(KEY, 3) == STATE
        await p.write(KEY, STATE)
        assert await p.initialize(KEY, -1) == ShareState(0, -1, -1, ())
        assert await p.summary(KEY) is None

    anyio.run(main)
    assert remote.calls[0] == ("read", (KEY, 3))
    assert remote.calls[1] == ("write", (KEY, STATE))  # the state survives the wire
    assert peers.called == [2, 2, 2, 2]


def test_coordinator_moves_and_loads_then_answers() -> None:
    # no leader yet, then broker 2 which lost it meanwhile, then this broker still loading
    topic = Topic(E.coordinator_not_available, 2, ME)
    remote = Coordinator(topic, E.not_coordinator)
    local = Coordinator(topic, E.coordinator_load_in_progress)
    cache = Cache()
    p = persister(topic, local, Peers({2: remote}), cache)

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def new_leaders() -> None:  # metadata changes wake the retries early
                for _ in range(3):
                    await anyio.sleep(0.01)
                    cache.bump()

            tg.start_soon(new_leaders)
            await p.write(KEY, STATE)

    anyio.run(main)
    assert topic.asked == 4
    assert [name for name, _ in remote.calls] == ["write"]
    assert [name for name, _ in local.calls] == ["write", "write"]


def test_fencing_is_not_retried() -> None:
    topic = Topic(2)
    remote = Coordinator(topic, E.fenced_leader_epoch)
    p = persister(topic, Coordinator(topic), Peers({2: remote}))

    async def main() -> None:
        with pytest.raises(KafkaError) as e:
            await p.write(KEY, STATE)
        assert e.value.code == E.fenced_leader_epoch

    anyio.run(main)
    assert len(remote.calls) == 1


def test_gives_up_at_the_deadline(caplog: pytest.LogCaptureFixture) -> None:
    topic = Topic(3)  # broker 3 is gone
    p = persister(topic, Coordinator(topic), Peers({}), timeout=0.3)

    async def main() -> None:
        with pytest.raises(KafkaError) as e:
            await p.summary(KEY)
        assert e.value.code == E.broker_not_available
        assert "__share_group_state-7 (broker 3)" in str(e.value)

    anyio.run(main)
    assert topic.asked > 1
    assert "check that partition's leader and ISR" in caplog.text


def test_proto_conversions_refuse_bad_input() -> None:
    with pytest.raises(KafkaError) as e:
        key_from_proto(replication_pb2.SharePartition(group_id="g", topic_id=b"short"))
    assert e.value.code == E.invalid_request
    data = replication_pb2.ShareStateData(
        batches=[replication_pb2.ShareStateBatch(delivery_state=3)]
    )
    with pytest.raises(KafkaError) as e:  # no such delivery state
        state_from_proto(data)
    assert e.value.code == E.invalid_request
