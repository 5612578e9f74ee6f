"""A broker that cannot reach the meta service stops coordinating before the meta service may
fence it and hand its coordinator partitions to another broker (issue 29: a zombie coordinator
kept answering an old member's Heartbeats while the new coordinator gave its partitions to
another member). Here the whole meta quorum is frozen (SIGSTOP): the broker's heartbeats fail
while clients still reach it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient
from tests.integration.test_groups_protocol import Member, coordinator

FIND_COORDINATOR, INIT_PRODUCER_ID = 10, 22

SESSION_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("meta-lease"),
        brokers=1,
        metas=1,
        offsets_topic_replication_factor=1,
        transaction_state_log_replication_factor=1,
        transaction_state_log_min_isr=1,
        group_initial_rebalance_delay_ms=0,
        broker_session_timeout_ms=SESSION_TIMEOUT_MS,
        broker_heartbeat_interval_ms=500,
    ) as c:
        yield c


def _init_producer(w: WireClient) -> int:
    """The error of InitProducerId for a transactional id (this broker coordinates them all;
    FindCoordinator creates `__transaction_state`)."""
    w.call(FIND_COORDINATOR, 3, key="lease-txn", key_type=1)
    r = w.call(INIT_PRODUCER_ID, 4, transactional_id="lease-txn", transaction_timeout=60_000)
    return int(r.error_code)


def test_a_broker_cut_off_from_the_meta_service_stops_coordinating_and_resumes(
    cluster: LocalCluster,
) -> None:
    _, port = coordinator(cluster, "lease-group")
    member = Member(port, "lease-group")
    txn = WireClient(port)
    metas = [name for name, node in cluster.nodes.items() if node.kind == "meta"]
    try:
        wait_for(lambda: _init_producer(txn) == ErrorCode.none, what="the transaction coordinator")
        # a session far longer than the pause: the member survives it
        r = member.join(session_timeout=60_000, rebalance_timeout=60_000)
        assert r.error_code == ErrorCode.none, r
        s = member.sync(assignments={member.member_id: b"mine"})
        assert s.error_code == ErrorCode.none, s
        assert member.heartbeat().error_code == ErrorCode.none
        for name in metas:
            cluster.signal_node(name, signal.SIGSTOP)
        try:
            wait_for(
                lambda: member.heartbeat().error_code == ErrorCode.not_coordinator,
                timeout=4 * SESSION_TIMEOUT_MS / 1000,
                what="NOT_COORDINATOR from the broker whose meta lease lapsed",
                interval=0.2,
            )
            assert _init_producer(txn) == ErrorCode.not_coordinator  # transactions too
        finally:
            for name in metas:
                cluster.signal_node(name, signal.SIGCONT)
        wait_for(
            lambda: member.heartbeat().error_code == ErrorCode.none,
            timeout=60,
            what="the group served again once the broker heartbeats to the meta service",
            interval=0.2,
        )
        wait_for(lambda: _init_producer(txn) == ErrorCode.none, what="transactions served again")
    finally:
        member.close()
        txn.sock.close()
