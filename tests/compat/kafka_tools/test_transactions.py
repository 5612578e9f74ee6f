"""kafka-transactions: an open transaction listed, described, found not hanging, and
aborted by an operator.
"""

from __future__ import annotations

from confluent_kafka import Producer

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import ok, produce, rows, tool


def test_transactions_list_describe_abort(cluster: LocalCluster) -> None:
    """An open transaction as the tool lists and describes it, then aborted by an operator:
    the marker it writes lets read_committed consumers past the transaction's records."""
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic txn --partitions 1")
    produce(b, "txn", ["plain-0", "plain-1"])  # offsets 0 and 1
    producer = Producer(
        {"bootstrap.servers": b, "transactional.id": "ops-tx", "transaction.timeout.ms": 600000}
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn", value=b"txn-%d" % i)  # offsets 2, 3 and 4
        producer.flush()

        listed = {r[0]: r for r in rows(ok(b, "kafka-transactions list"))}
        assert listed["TransactionalId"] == [
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "TransactionState",
        ]
        coordinator, pid, state = listed["ops-tx"][1:]
        assert state == "Ongoing"
        described = rows(ok(b, "kafka-transactions describe --transactional-id ops-tx"))
        assert described[0] == [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ]
        assert described[1][:6] == [coordinator, "ops-tx", pid, "0", "Ongoing", "600000"]
        assert described[1][8] == "txn-0"

        def producers() -> dict[str, list[str]]:
            out = rows(ok(b, "kafka-transactions describe-producers --topic txn --partition 0"))
            assert out[0] == [
                "ProducerId",
                "ProducerEpoch",
                "LatestCoordinatorEpoch",
                "LastSequence",
                "LastTimestamp",
                "CurrentTransactionStartOffset",
            ]
            return {r[0]: r for r in out[1:]}

        found = producers()[pid]
        assert found[1:4] == ["0", "-1", "2"]
        assert found[5] == "2"
        # Its coordinator knows the partition is in it: not hanging.
        hanging = [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
        find = "kafka-transactions find-hanging --topic txn --max-transaction-timeout 0"
        assert rows(ok(b, find)) == [hanging]

        def read_committed(options: str) -> list[str]:
            consume = "kafka-console-consumer --topic txn --partition 0 --offset earliest"
            out = tool(b, f"{consume} --isolation-level read_committed {options}")
            return out.stdout.split()

        # Held back by the open transaction: two records, then nothing for 3 s.
        assert read_committed("--timeout-ms 3000") == ["plain-0", "plain-1"]
        abort = "kafka-transactions abort --topic txn --partition 0 --start-offset 2"
        assert ok(b, abort) == ""
        found = producers()[pid]
        assert found[1:4] == ["0", "0", "2"]
        assert found[5] == "None"
        produce(b, "txn", ["plain-6"])  # after the abort marker at offset 5
        after = read_committed("--max-messages 3 --timeout-ms 30000")
        assert after == ["plain-0", "plain-1", "plain-6"]
    finally:
        producer.abort_transaction()  # its coordinator still has it open
