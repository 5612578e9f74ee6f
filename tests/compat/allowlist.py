"""Differences from Apache Kafka that a user would accept, each with its reason. A case listed
here still runs and is reported ("allowlisted"), so the table shows every difference."""

_AUTO_CREATE = (
    "Kafka 4 sends the creation to its controller and answers UNKNOWN_TOPIC_OR_PARTITION at "
    "once; Rafka creates the topic before answering, so the first Metadata already lists it "
    "(a client retries Metadata on that error, and then sees the same topic on both)"
)

_KAFKA_20785 = (
    "Kafka 4.4.0 predates KAFKA-20785 (apache/kafka#23204): with transaction version 2 it "
    "takes a commit at the epoch just before an abort's bump (a commit that raced the "
    "coordinator's timeout abort) for a retry and answers INVALID_TXN_STATE, which is fatal "
    "for the producer; Rafka answers PRODUCER_FENCED as Kafka does since that fix, and the "
    "client recovers (a new producer continues)"
)

ALLOWED: dict[str, str] = {
    "Metadata v1: unknown topic, auto-created": _AUTO_CREATE,
    "Metadata v12: unknown topic, auto-created": _AUTO_CREATE,
    "EndTxn v5: a commit that raced the timeout abort (KAFKA-20785)": _KAFKA_20785,
    "EndTxn v5: a commit at the epoch before the abort's bump": _KAFKA_20785,
}
