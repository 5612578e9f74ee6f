"""Random joins, leaves, crashes, restarts, lost responses, slow revocations, subscription and
metadata changes: no partition is ever owned by two consumers at once (KIP-848's safety
property), and once the chaos stops the group converges to a stable, complete assignment that
its records alone rebuild."""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dataplane.coordinator.consumer.group import GroupState
from dataplane.protocol.errors import ErrorCode, KafkaError

from .harness import Client, Harness, consumer_group, parts, tid, topic

NAMES = ["a", "b", "c", "d", "s1", "s2"]  # s*: static members (instance id = name)
SUBSCRIPTIONS = [("t",), ("t", "u"), ("u",)]


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.t_partitions = 4
        self.h = Harness([topic("t", self.t_partitions), topic("u", 3)])
        self.clients: dict[str, Client] = {}  # live consumers
        self.crashed: dict[str, str] = {}  # name -> member id the server may still have
        self.away: dict[str, str] = {}  # static members restarting -> old member id
        self.ids = itertools.count()

    # -- helpers --------------------------------------------------------------------------

    def member_id(self, name: str) -> str:
        return f"{name}-{next(self.ids)}"

    def lose(self, name: str) -> None:
        """The consumer is fenced: it loses its partitions and must rejoin."""
        client = self.clients.pop(name)
        client.owned = set()
        if client.member_id in self.h.consumer_group().members:
            # Kafka keeps the member until its session expires; fast-forward that.
            self.h.fence(client.member_id)

    def call(self, name: str, fn) -> None:
        try:
            fn()
        except KafkaError as e:
            # a step of the model may or may not be refused: pytest.raises cannot say "maybe"
            assert e.code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id), e  # noqa: PT017
            self.lose(name)

    # -- rules ----------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), topics=st.sampled_from(SUBSCRIPTIONS))
    def join(self, name, topics) -> None:
        if name in self.clients or name in self.crashed:
            return
        static = name.startswith("s")
        client = Client(
            self.h, self.member_id(name), topics, instance_id=name if static else None, eager=False
        )
        try:
            client.heartbeat()
        except KafkaError as e:  # only a static member's rejoin may be refused
            assert e.code == ErrorCode.unreleased_instance_id, e  # noqa: PT017
            assert static, e  # noqa: PT017
            return
        self.away.pop(name, None)
        self.clients[name] = client

    @rule(data=st.data(), report=st.booleans())
    @precondition(lambda self: self.clients)
    def heartbeat(self, data, report) -> None:
        name = data.draw(st.sampled_from(sorted(self.clients)))
        client = self.clients[name]
        self.call(name, lambda: client.heartbeat(report=report))

    @rule(data=st.data())
    @precondition(lambda self: self.clients)
    def reconcile(self, data) -> None:
        self.clients[data.draw(st.sampled_from(sorted(self.clients)))].reconcile()

    @rule(data=st.data())
    @precondition(lambda self: any(c.epoch > 0 for c in self.clients.values()))
    def lost_response(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, c in self.clients.items() if c.epoch)))
        self.call(name, self.clients[name].lose_response)

    @rule(data=st.data(), topics=st.sampled_from(SUBSCRIPTIONS))
    @precondition(lambda self: any(c.epoch > 0 for c in self.clients.values()))
    def resubscribe(self, data, topics) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, c in self.clients.items() if c.epoch)))
        client = self.clients[name]
        client.topics = topics
        self.call(name, lambda: client.heartbeat(subscribed_topic_names=topics))

    @rule(data=st.data())
    @precondition(lambda self: self.clients)
    def leave(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(self.clients)))
        client = self.clients[name]
        client.owned = set()  # a consumer revokes everything before it leaves
        self.call(name, client.leave)
        self.clients.pop(name, None)

    @rule(data=st.data())
    @precondition(lambda self: any(n.startswith("s") for n in self.clients))
    def static_restart(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(n for n in self.clients if n.startswith("s"))))
        client = self.clients[name]
        if client.epoch <= 0:
            return
        client.owned = set()
        try:
            self.h.consumer_group_heartbeat(
                member_id=client.member_id, member_epoch=-2, instance_id=name
            )
        except KafkaError as e:  # the leave may or may not be refused
            assert e.code in (ErrorCode.fenced_instance_id, ErrorCode.unknown_member_id), e  # noqa: PT017
        del self.clients[name]
        self.away[name] = client.member_id

    @rule(data=st.data())
    @precondition(lambda self: self.clients)
    def crash(self, data) -> None:
        name = data.draw(st.sampled_from(sorted(self.clients)))
        client = self.clients.pop(name)
        client.owned = set()  # a dead process consumes nothing
        self.crashed[name] = client.member_id

    @rule(data=st.data())
    @precondition(lambda self: self.crashed or self.away)
    def session_expires(self, data) -> None:
        pool = {**self.crashed, **self.away}
        name = data.draw(st.sampled_from(sorted(pool)))
        member_id = pool[name]
        self.crashed.pop(name, None)
        self.away.pop(name, None)
        group = consumer_group(self.h.shard)
        if group is not None and member_id in group.members:
            self.h.now += 45_000
            assert member_id in group.expired_members(self.h.now)
            self.h.fence(member_id)
            # Everyone else heartbeated in the meantime (keep their sessions alive).
            for m in group.members:
                group.deadlines.session(m, self.h.now + 45_000)

    @rule(data=st.data())
    @precondition(lambda self: self.clients)
    def rebalance_timeout(self, data) -> None:
        """A member that does not revoke in time is fenced (and, being fenced, stops)."""
        group = self.h.consumer_group()
        slow = sorted(
            n
            for n, c in self.clients.items()
            if c.member_id in group.members
            and group.deadlines.rebalance_ms(c.member_id) is not None
        )
        if slow:
            self.lose(data.draw(st.sampled_from(slow)))

    @rule()
    def add_partitions(self) -> None:
        if self.t_partitions < 8:
            self.t_partitions += 1
            self.h.set_topics([topic("t", self.t_partitions), topic("u", 3)])

    # -- the properties -------------------------------------------------------------------

    @invariant()
    def no_partition_owned_twice(self) -> None:
        seen: dict[tuple[bytes, int], str] = {}
        for name, client in self.clients.items():
            for tp in client.owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {name}"
                seen[tp] = name

    @invariant()
    def consumers_only_own_what_the_coordinator_counts_as_theirs(self) -> None:
        group = consumer_group(self.h.shard)
        for client in self.clients.values():
            if group is None or client.member_id not in group.members:
                assert not client.owned
                continue
            member = group.members[client.member_id]
            server = parts(member.assigned_partitions) | parts(member.partitions_pending_revocation)
            assert client.owned <= server

    def teardown(self) -> None:
        group = consumer_group(self.h.shard)
        if group is None:
            return
        for member_id in [*self.crashed.values(), *self.away.values()]:
            if member_id in group.members:
                self.h.fence(member_id)
        for _ in range(6):
            for name in sorted(self.clients):
                client = self.clients[name]
                self.call(name, client.heartbeat)
                client.reconcile()
                if name not in self.clients:  # fenced (two responses lost): it rejoins
                    self.join(name, client.topics)
            self.no_partition_owned_twice()
        assert set(group.members) == {c.member_id for c in self.clients.values()}
        if self.clients:
            assert group.state == GroupState.STABLE, group.state
        subscribed = {t for c in self.clients.values() for t in c.topics}
        sizes = {"t": self.t_partitions, "u": 3}
        expected = {(tid(t), p) for t in subscribed for p in range(sizes[t])}
        owned = set().union(*(c.owned for c in self.clients.values())) if self.clients else set()
        assert owned == expected
        for client in self.clients.values():
            assert parts(group.members[client.member_id].assigned_partitions) == client.owned
        rebuilt = self.h.replayed_consumer_group()
        assert rebuilt is not None
        assert rebuilt.snapshot() == group.snapshot()


GroupMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
TestGroupMachine = GroupMachine.TestCase
