"""`rafka transactions describe` rows (cluster/cli.py) and the DescribeTransactions decoding
(cluster/admin.py) that tolerates Kafka's -1 start time, which kio's reader refuses."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from kio.serial import entity_writer

from cluster.admin_transactions import (
    _DESCRIBE_TRANSACTIONS_RESPONSE,
    TransactionDescription,
    _description,
)
from cluster.cli import format_age, format_time_ms, transaction_row
from dataplane.protocol.codec import ResponseBuilder

START = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z


def description(state: str, start: int = START) -> TransactionDescription:
    return TransactionDescription(
        "etl-1",
        2,
        state,
        4001,
        3,
        60_000,
        start,
        [("out", 0), ("out", 2), ("__consumer_offsets", 7)],
    )


def test_open_transaction_row_has_age_and_partitions() -> None:
    row = transaction_row(description("Ongoing"), START + 12_345)
    assert row == [
        "etl-1",
        2,
        4001,
        3,
        "Ongoing",
        60_000,
        "2023-11-14T22:13:20.123Z",
        "12.3s",
        "out-0,out-2,__consumer_offsets-7",
    ]
    assert transaction_row(description("PrepareCommit"), START + 500)[7] == "500ms"


def test_finished_or_unstarted_transaction_has_no_age() -> None:
    done = transaction_row(description("CompleteCommit"), START + 99_000)
    assert done[6] == "2023-11-14T22:13:20.123Z"
    assert done[7] == "-"
    empty = TransactionDescription("t", 1, "Empty", 5, 0, 60_000, -1, [])
    assert transaction_row(empty, START)[6:] == ["-", "-", "-"]


def test_age_never_negative_under_clock_skew() -> None:
    assert description("Ongoing").age_ms(START - 5_000) == 0


def test_formats() -> None:
    assert format_time_ms(-1) == "-"
    assert format_time_ms(0) == "1970-01-01T00:00:00.000Z"
    assert [format_age(ms) for ms in (0, 999, 1_000, 59_949, 60_000, 307_000)] == [
        "0ms",
        "999ms",
        "1.0s",
        "59.9s",
        "1m00s",
        "5m07s",
    ]
    assert format_age(2 * 3_600_000 + 3 * 60_000 + 59_000) == "2h03m"
    assert format_age(3 * 86_400_000 + 4 * 3_600_000) == "3d04h"


def test_describe_response_decodes_a_minus_one_start_time() -> None:
    """A response as kio would write it, its start time then patched to -1 as Kafka sends it
    for a transactional id with no transaction yet."""
    b = ResponseBuilder(65, 0)
    marker = START
    response = b.DescribeTransactionsResponse(
        throttle_time=0,
        transaction_states=(
            b.TransactionState(
                error_code=0,
                transactional_id="etl-1",
                transaction_state="Empty",
                transaction_timeout=60_000,
                transaction_start_time=datetime.fromtimestamp(marker / 1000, tz=UTC),
                producer_id=4001,
                producer_epoch=0,
                topics=(b.TopicData(topic="out", partitions=(1, 0)),),
            ),
        ),
    )
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    body = out.getvalue().replace(marker.to_bytes(8, "big"), (-1).to_bytes(8, "big", signed=True))
    decoded, end = _DESCRIBE_TRANSACTIONS_RESPONSE.decode(body, 0)
    assert end == len(body)
    (t,) = decoded.transaction_states
    d = _description(t, 3)
    assert d == TransactionDescription(
        "etl-1", 3, "Empty", 4001, 0, 60_000, -1, [("out", 0), ("out", 1)]
    )
