"""Authorization of the group and transaction coordinators' APIs: groups and transactional ids
with and without the writer's ACLs, and the authorized operations of ConsumerGroupDescribe (of
the group OffsetCommit made) and DescribeTopicPartitions."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from cluster.admin_transactions import _DESCRIBE_TRANSACTIONS_RESPONSE
from cluster.kafka_client import builder
from tests.compat.pair import Pair
from tests.compat.security.support import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    CLOSED,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    DESCRIBED,
    END_TXN,
    FIND_COORDINATOR,
    GROUP,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_TRANSACTIONS,
    MISSING,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    OPEN,
    OTHER_GROUP,
    OTHER_TXN,
    SYNC_GROUP,
    TXN,
    TXN_OFFSET_COMMIT,
    Principals,
    call_decoded,
)

# ------------------------------------------------------------------------------- groups


def test_find_coordinator_authorization(users: Principals) -> None:
    users.writer.call(
        "FindCoordinator as writer: groups and transactional ids, allowed and not",
        FIND_COORDINATOR,
        4,
        masked=["coordinators.*.node_id"],
        sort=["coordinators"],
        key_type=0,
        coordinator_keys=(GROUP, OTHER_GROUP),
    )
    users.writer.call(
        "FindCoordinator as writer: transactional ids, allowed and not",
        FIND_COORDINATOR,
        4,
        masked=["coordinators.*.node_id"],
        sort=["coordinators"],
        key_type=1,
        coordinator_keys=(TXN, OTHER_TXN),
    )


def test_join_group_unauthorized(users: Principals) -> None:
    b = builder(JOIN_GROUP, 9)
    users.writer.call(
        "JoinGroup as writer: a group without READ",
        JOIN_GROUP,
        9,
        group_id=OTHER_GROUP,
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(b.JoinGroupRequestProtocol(name="range", metadata=b""),),
        reason=None,
    )


def test_group_apis_unauthorized(users: Principals) -> None:
    users.writer.call(
        "Heartbeat as writer: a group without READ",
        HEARTBEAT,
        4,
        group_id=OTHER_GROUP,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
    )
    users.writer.call(
        "SyncGroup as writer: a group without READ",
        SYNC_GROUP,
        5,
        group_id=OTHER_GROUP,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )
    lb = builder(LEAVE_GROUP, 5)
    users.writer.call(
        "LeaveGroup as writer: a group without READ",
        LEAVE_GROUP,
        5,
        group_id=OTHER_GROUP,
        members=(lb.MemberIdentity(member_id="m", group_instance_id=None, reason=None),),
    )
    users.writer.call(
        "DescribeGroups as writer: allowed and not, authorized operations",
        DESCRIBE_GROUPS,
        5,
        sort=["groups"],
        groups=(GROUP, OTHER_GROUP),
        include_authorized_operations=True,
    )
    users.writer.call(
        "DeleteGroups as writer: groups without DELETE",
        DELETE_GROUPS,
        2,
        sort=["results"],
        groups_names=(GROUP, OTHER_GROUP),
    )
    users.writer.call("ListGroups as writer", LIST_GROUPS, 5, states_filter=(), types_filter=())
    ob = builder(OFFSET_DELETE, 0)
    users.writer.call(
        "OffsetDelete as writer: a group without DELETE",
        OFFSET_DELETE,
        0,
        group_id=OTHER_GROUP,
        topics=(
            ob.OffsetDeleteRequestTopic(
                name=OPEN, partitions=(ob.OffsetDeleteRequestPartition(partition_index=0),)
            ),
        ),
    )


def offset_commit(pair: Pair, case: str, group: str, *topics: str) -> None:
    b = builder(OFFSET_COMMIT, 9)
    pair.call(
        case,
        OFFSET_COMMIT,
        9,
        sort=["topics"],
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            b.OffsetCommitRequestTopic(
                name=t,
                partitions=(
                    b.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            )
            for t in topics
        ),
    )


def test_offset_commit_authorization(users: Principals) -> None:
    offset_commit(users.writer, "OffsetCommit as writer: a group without READ", OTHER_GROUP, OPEN)
    offset_commit(
        users.writer,
        "OffsetCommit as writer: its group, topics with and without READ",
        GROUP,
        OPEN,
        CLOSED,
        MISSING,
    )


def test_offset_fetch_authorization(users: Principals) -> None:
    b = builder(OFFSET_FETCH, 9)
    users.writer.call(
        "OffsetFetch as writer: groups with and without READ, topics with and without DESCRIBE",
        OFFSET_FETCH,
        9,
        sort=["groups", "groups.*.topics"],
        groups=tuple(
            b.OffsetFetchRequestGroup(
                group_id=g,
                member_id=None,
                member_epoch=-1,
                topics=(
                    b.OffsetFetchRequestTopics(name=OPEN, partition_indexes=(0,)),
                    b.OffsetFetchRequestTopics(name=CLOSED, partition_indexes=(0,)),
                ),
            )
            for g in (GROUP, OTHER_GROUP)
        ),
        require_stable=False,
    )
    b7 = builder(OFFSET_FETCH, 7)
    users.writer.call(
        "OffsetFetch v7 as writer: its group, topics with and without DESCRIBE",
        OFFSET_FETCH,
        7,
        sort=["topics"],
        group_id=GROUP,
        topics=tuple(
            b7.OffsetFetchRequestTopic(name=t, partition_indexes=(0,)) for t in (OPEN, CLOSED)
        ),
        require_stable=False,
    )
    users.writer.call(
        "OffsetFetch as writer: all topics of its group",
        OFFSET_FETCH,
        9,
        groups=(
            b.OffsetFetchRequestGroup(group_id=GROUP, member_id=None, member_epoch=-1, topics=None),
        ),
        require_stable=False,
    )


def test_consumer_group_heartbeat_authorization(users: Principals) -> None:
    common: dict[str, Any] = dict(
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )
    users.writer.call(
        "ConsumerGroupHeartbeat as writer: a group without READ",
        CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=OTHER_GROUP,
        subscribed_topic_names=(OPEN,),
        **common,
    )
    users.writer.call(
        "ConsumerGroupHeartbeat as writer: subscribed to a topic without DESCRIBE",
        CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id="sec-g-hb",
        subscribed_topic_names=(OPEN, CLOSED),
        **common,
    )


# ------------------------------------------------------------------------- transactions


def test_init_producer_id_authorization(users: Principals) -> None:
    masked = ["producer_id", "producer_epoch"]
    for what, pair, txn in (
        ("writer, a transactional id without WRITE", users.writer, OTHER_TXN),
        ("writer, its transactional id", users.writer, TXN),
        ("writer, idempotent (WRITE on a topic)", users.writer, None),
        ("reader, idempotent (no WRITE anywhere)", users.reader, None),
    ):
        pair.call(
            f"InitProducerId as {what}",
            INIT_PRODUCER_ID,
            5,
            masked=masked,
            transactional_id=txn,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )


def test_add_partitions_to_txn_authorization(users: Principals) -> None:
    b = builder(ADD_PARTITIONS_TO_TXN, 3)
    for what, txn, topics in (
        ("a transactional id without WRITE", OTHER_TXN, (OPEN,)),
        ("its transactional id, a topic without WRITE", TXN, (OPEN, CLOSED, MISSING)),
    ):
        users.writer.call(
            f"AddPartitionsToTxn v3 as writer: {what}",
            ADD_PARTITIONS_TO_TXN,
            3,
            sort=["results_by_topic_v3_and_below"],
            v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=12345,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=tuple(
                b.AddPartitionsToTxnTopic(name=t, partitions=(0,)) for t in topics
            ),
        )
    users.writer.call(
        "AddOffsetsToTxn as writer: a transactional id without WRITE",
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=OTHER_TXN,
        producer_id=12345,
        producer_epoch=0,
        group_id=GROUP,
    )
    users.writer.call(
        "AddOffsetsToTxn as writer: a group without READ",
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=TXN,
        producer_id=12345,
        producer_epoch=0,
        group_id=OTHER_GROUP,
    )
    users.writer.call(
        "EndTxn as writer: a transactional id without WRITE",
        END_TXN,
        4,
        transactional_id=OTHER_TXN,
        producer_id=12345,
        producer_epoch=0,
        committed=True,
    )
    tb = builder(TXN_OFFSET_COMMIT, 3)
    users.writer.call(
        "TxnOffsetCommit as writer: a transactional id without WRITE",
        TXN_OFFSET_COMMIT,
        3,
        transactional_id=OTHER_TXN,
        group_id=GROUP,
        producer_id=12345,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            tb.TxnOffsetCommitRequestTopic(
                name=OPEN,
                partitions=(
                    tb.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )


def test_transaction_listings(users: Principals) -> None:
    call_decoded(
        users.writer,
        "DescribeTransactions as writer: an id without DESCRIBE",
        _DESCRIBE_TRANSACTIONS_RESPONSE,
        DESCRIBE_TRANSACTIONS,
        0,
        transactional_ids=(OTHER_TXN,),
    )
    call_decoded(
        users.writer,
        "DescribeTransactions as writer: its id",
        _DESCRIBE_TRANSACTIONS_RESPONSE,
        DESCRIBE_TRANSACTIONS,
        0,
        masked=["transaction_states.*.producer_id"],
        transactional_ids=(TXN,),
    )
    users.reader.call(
        "ListTransactions as reader",
        LIST_TRANSACTIONS,
        1,
        state_filters=(),
        producer_id_filters=(),
        duration_filter=-1,
    )
    db = builder(DESCRIBE_PRODUCERS, 0)
    users.writer.call(
        "DescribeProducers as writer: topics with and without READ",
        DESCRIBE_PRODUCERS,
        0,
        sort=["topics"],
        topics=tuple(db.TopicRequest(name=t, partition_indexes=(0,)) for t in (OPEN, CLOSED)),
    )


def test_group_and_topic_authorized_operations(users: Principals) -> None:
    users.writer.call(
        "ConsumerGroupDescribe as writer: groups with and without DESCRIBE, authorized ops",
        69,
        1,
        sort=["groups"],
        group_ids=(GROUP, OTHER_GROUP),
        include_authorized_operations=True,
    )
    b = builder(75, 0)
    users.writer.call(
        "DescribeTopicPartitions as writer: topics with and without DESCRIBE, authorized ops",
        75,
        0,
        masked=["topics.*.partitions.*.leader_epoch"],
        sort=["topics"],
        topics=tuple(b.TopicRequest(name=t) for t in (OPEN, DESCRIBED, CLOSED, MISSING)),
        response_partition_limit=2000,
        cursor=None,
    )
