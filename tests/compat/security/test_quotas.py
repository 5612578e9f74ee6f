"""Client quotas: AlterClientQuotas' validation, DescribeClientQuotas' matching, and the
throttles of producer_byte_rate, consumer_byte_rate, request_percentage and
controller_mutation_rate."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from cluster.kafka_client import KafkaConnection, builder
from cluster.polling import wait_for
from tests.compat.pair import Pair, Side, record
from tests.compat.security.support import (
    ALL_TOPICS,
    ALTER_QUOTAS,
    CREATE_TOPICS,
    DESCRIBE_QUOTAS,
    FETCH,
    METADATA,
    OPEN,
    PRODUCE,
    TIMEOUT,
    Principals,
    produce,
)
from tests.unit.log.batches import make_batch


def quota_entry(entity: dict[str, str | None], **ops: float | None) -> Any:
    """An AlterClientQuotas entry: `ops` set a key to a value, or remove it (None)."""
    b = builder(ALTER_QUOTAS, 1)
    return b.EntryData(
        entity=tuple(b.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
        ops=tuple(
            b.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()
        ),
    )


def alter_quotas(pair: Pair, case: str, *entries: Any, validate_only: bool = False) -> None:
    pair.call(
        case,
        ALTER_QUOTAS,
        1,
        sort=["entries", "entries.*.entity"],  # an entity is a map: its order is Kafka's hash's
        entries=entries,
        validate_only=validate_only,
    )


@pytest.mark.parametrize(
    ("what", "entity", "ops"),
    [
        ("an unknown entity type", {"service": "x"}, {"producer_byte_rate": 1024.0}),
        ("an unknown key", {"user": "u1"}, {"bytes_per_fortnight": 1.0}),
        ("a negative rate", {"user": "u1"}, {"producer_byte_rate": -5.0}),
        ("a zero rate", {"user": "u1"}, {"producer_byte_rate": 0.0}),
        ("a fractional byte rate", {"user": "u1"}, {"producer_byte_rate": 1.5}),
        ("request_percentage 0.5", {"user": "u1"}, {"request_percentage": 0.5}),
        ("a negative request_percentage", {"user": "u1"}, {"request_percentage": -1.0}),
        ("controller_mutation_rate 2.5", {"client-id": "c1"}, {"controller_mutation_rate": 2.5}),
        ("user and client-id", {"user": "u1", "client-id": "c1"}, {"consumer_byte_rate": 2048.0}),
        ("the default user", {"user": None}, {"producer_byte_rate": 1e6}),
        ("an empty entity", {}, {"producer_byte_rate": 1024.0}),
        (
            "ip and user together",
            {"ip": "127.0.0.1", "user": "u1"},
            {"connection_creation_rate": 5.0},
        ),
        ("a bad ip", {"ip": "not-an-ip"}, {"connection_creation_rate": 5.0}),
        ("an ip with a byte rate", {"ip": "127.0.0.1"}, {"producer_byte_rate": 5.0}),
        (
            "an ip's connection_creation_rate",
            {"ip": "127.0.0.1"},
            {"connection_creation_rate": 5.0},
        ),
        ("a user's connection_creation_rate", {"user": "u1"}, {"connection_creation_rate": 5.0}),
        ("removing a key never set", {"user": "u1"}, {"producer_byte_rate": None}),
        (
            "a key set and removed at once",
            {"user": "u1"},
            {"producer_byte_rate": 1.0, "consumer_byte_rate": None},
        ),
    ],
)
def test_alter_quotas_validation(
    users: Principals, what: str, entity: dict[str, str | None], ops: dict[str, float | None]
) -> None:
    alter_quotas(
        users.admin,
        f"AlterClientQuotas (validate only): {what}",
        quota_entry(entity, **ops),
        validate_only=True,
    )


def test_alter_quotas_duplicate_entity(users: Principals) -> None:
    entry = quota_entry({"user": "u1"}, producer_byte_rate=1024.0)
    alter_quotas(
        users.admin, "AlterClientQuotas: one entity twice", entry, entry, validate_only=True
    )


def test_alter_quotas_unprivileged(users: Principals) -> None:
    alter_quotas(
        users.writer,
        "AlterClientQuotas as writer (no CLUSTER ALTER_CONFIGS)",
        quota_entry({"user": "writer"}, producer_byte_rate=1e9),
    )


def describe_quotas(
    pair: Pair, case: str, strict: bool = False, **components: tuple[int, str | None]
) -> None:
    b = builder(DESCRIBE_QUOTAS, 1)
    pair.call(
        case,
        DESCRIBE_QUOTAS,
        1,
        sort=["entries", "entries.*.entity", "entries.*.values"],
        components=tuple(
            b.ComponentData(entity_type=t.replace("_", "-"), match_type=m, match=n)
            for t, (m, n) in components.items()
        ),
        strict=strict,
    )


EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def test_describe_quotas(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: quotas to describe",
        quota_entry({"user": "q-user"}, producer_byte_rate=1e6, request_percentage=50.0),
        quota_entry({"user": "q-user", "client-id": "q-client"}, consumer_byte_rate=2e6),
        quota_entry({"user": None}, controller_mutation_rate=100.0),
    )
    wait_for(partial(quota_listed, users.admin, "q-user"), 30, "the quotas on both")
    describe_quotas(users.admin, "DescribeClientQuotas: a user, exact", user=(EXACT, "q-user"))
    describe_quotas(
        users.admin, "DescribeClientQuotas: a user, strict", strict=True, user=(EXACT, "q-user")
    )
    describe_quotas(users.admin, "DescribeClientQuotas: the default user", user=(DEFAULT, None))
    describe_quotas(
        users.admin,
        "DescribeClientQuotas: any user with a client id",
        user=(SPECIFIED, None),
        client_id=(SPECIFIED, None),
    )
    describe_quotas(
        users.admin, "DescribeClientQuotas: an unknown entity type", service=(EXACT, "x")
    )
    describe_quotas(users.admin, "DescribeClientQuotas: match type 7", user=(7, "q-user"))
    describe_quotas(users.admin, "DescribeClientQuotas: exact without a name", user=(EXACT, None))
    describe_quotas(
        users.admin, "DescribeClientQuotas: default with a name", user=(DEFAULT, "q-user")
    )
    describe_quotas(users.admin, "DescribeClientQuotas: an ip", ip=(SPECIFIED, None))
    describe_quotas(
        users.writer,
        "DescribeClientQuotas as writer (no CLUSTER DESCRIBE_CONFIGS)",
        user=(SPECIFIED, None),
    )


def quota_listed(pair: Pair, user: str) -> bool:
    b = builder(DESCRIBE_QUOTAS, 1)
    component = b.ComponentData(entity_type="user", match_type=EXACT, match=user)

    def listed(side: Side) -> bool:
        return bool(
            side.conn().call(DESCRIBE_QUOTAS, 1, components=(component,), strict=True).entries
        )

    return all(pair.both(listed))


def throttled(
    pair: Pair, case: str, client_id: str, api_key: int, version: int, what: Callable[[int], dict]
) -> None:
    """Sends the request (`what(attempt)` gives its fields) as `client_id` on each broker until
    one answer carries a throttle (the quota reaches a broker's enforcement a moment after
    AlterClientQuotas); compares that both throttle, within an order of magnitude."""
    throttles = []
    for side in pair.sides:
        with KafkaConnection.to_any(side.bootstrap, security=side.security) as c:
            c.client_id = client_id.encode()
            attempt = iter(range(1_000_000))

            def throttle(c: KafkaConnection = c, attempt: Iterator[int] = attempt) -> int:
                answer = c.call(api_key, version, **what(next(attempt)))
                return int(answer.throttle_time.total_seconds() * 1000)

            throttles.append(wait_for(throttle, 30, f"{side.name} throttling {client_id}"))
    kafka, rafka = throttles
    found = [] if max(throttles) <= 10 * min(throttles) else [f"throttle_time_ms {throttles}"]
    record(case, f"throttle_time_ms {kafka}", f"throttle_time_ms {rafka}", found)


def test_produce_throttled(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: producer_byte_rate of a client id",
        quota_entry({"client-id": "sec-slow-producer"}, producer_byte_rate=1024.0),
    )
    b = builder(PRODUCE, 11)
    batch = make_batch([b"x" * 4000] * 4, timestamps=[int(time.time() * 1000)] * 4)
    data = (
        b.TopicProduceData(
            name=OPEN, partition_data=(b.PartitionProduceData(index=0, records=batch),)
        ),
    )
    throttled(
        users.admin,
        "Produce over producer_byte_rate is throttled",
        "sec-slow-producer",
        PRODUCE,
        11,
        lambda _: {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": data},
    )


def test_fetch_throttled(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: consumer_byte_rate of a client id",
        quota_entry({"client-id": "sec-slow-consumer"}, consumer_byte_rate=1024.0),
    )
    batch = make_batch([b"y" * 4000] * 4, timestamps=[int(time.time() * 1000)] * 4)
    produce(users.admin, "Produce as the super user: data to fetch", OPEN, batch=batch)
    b = builder(FETCH, 12)
    topics = (
        b.FetchTopic(
            topic=OPEN,
            partitions=(
                b.FetchPartition(
                    partition=0,
                    current_leader_epoch=-1,
                    fetch_offset=0,
                    log_start_offset=-1,
                    partition_max_bytes=1 << 20,
                ),
            ),
        ),
    )
    throttled(
        users.admin,
        "Fetch over consumer_byte_rate is throttled",
        "sec-slow-consumer",
        FETCH,
        12,
        lambda _: {
            "replica_id": -1,
            "max_wait": datetime.timedelta(0),
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": topics,
            "forgotten_topics_data": (),
            "rack_id": "",
        },
    )


def test_request_percentage_throttled(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: request_percentage of a client id",
        # so small that one Metadata overshoots it on both, whose throttle is then bounded by
        # one quota window (a handler's time is the implementation's own)
        quota_entry({"client-id": "sec-busy"}, request_percentage=0.0001),
    )
    throttled(
        users.admin,
        "Requests over request_percentage are throttled",
        "sec-busy",
        METADATA,
        12,
        lambda _: ALL_TOPICS,
    )


def test_produce_over_request_percentage_throttled(users: Principals) -> None:
    """Kafka's Produce answer carries the larger of its byte-rate and request-time throttles
    (KafkaApis.handleProduceRequest)."""
    alter_quotas(
        users.admin,
        "AlterClientQuotas: request_percentage of a producer's client id",
        quota_entry({"client-id": "sec-busy-producer"}, request_percentage=0.0001),
    )
    b = builder(PRODUCE, 11)
    batch = make_batch([b"z" * 100], timestamps=[int(time.time() * 1000)])
    data = (
        b.TopicProduceData(
            name=OPEN, partition_data=(b.PartitionProduceData(index=0, records=batch),)
        ),
    )
    throttled(
        users.admin,
        "Produce over request_percentage is throttled",
        "sec-busy-producer",
        PRODUCE,
        11,
        lambda _: {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": data},
    )


def test_controller_mutation_rate(users: Principals) -> None:
    alter_quotas(
        users.admin,
        "AlterClientQuotas: controller_mutation_rate of a client id",
        # the user's own (the default user's quota of test_describe_quotas comes before a
        # client id's alone)
        quota_entry({"user": "admin", "client-id": "sec-mutator"}, controller_mutation_rate=1.0),
    )
    b = builder(CREATE_TOPICS, 7)

    def create(name: str) -> dict:
        topic = b.CreatableTopic(
            name=name, num_partitions=10, replication_factor=1, assignments=(), configs=()
        )
        return {"topics": (topic,), "timeout": TIMEOUT, "validate_only": False}

    throttled(
        users.admin,
        "CreateTopics over controller_mutation_rate is throttled",
        "sec-mutator",
        CREATE_TOPICS,
        7,
        lambda n: create(f"sec-mutation-{n}"),
    )
    answers = []
    for side in users.admin.sides:  # at once, on a new connection (the old one is muted)
        with KafkaConnection.to_any(side.bootstrap, security=side.security) as c:
            c.client_id = b"sec-mutator"
            answers.append(c.call(CREATE_TOPICS, 7, **create("sec-mutation-refused")))
    kafka, rafka = answers
    users.admin.compare(
        "CreateTopics v7 while over controller_mutation_rate: THROTTLING_QUOTA_EXCEEDED",
        kafka,
        rafka,
        masked=["topics.*.configs"],
    )
    record(
        "CreateTopics refused by the mutation quota carries a throttle",
        str(kafka.throttle_time),
        str(rafka.throttle_time),
        [] if all(a.throttle_time.total_seconds() > 0 for a in answers) else ["no throttle"],
    )
