"""Differences from Apache Kafka that a user would accept, each with its reason. A case listed
here still runs and is reported ("allowlisted"), so the table shows every difference."""

_AUTO_CREATE = (
    "Kafka 4 sends the creation to its controller and answers UNKNOWN_TOPIC_OR_PARTITION at "
    "once; Rafka creates the topic before answering, so the first Metadata already lists it "
    "(a client retries Metadata on that error, and then sees the same topic on both)"
)

ALLOWED: dict[str, str] = {
    "Metadata v1: unknown topic, auto-created": _AUTO_CREATE,
    "Metadata v12: unknown topic, auto-created": _AUTO_CREATE,
    "tool: share: describe, all consumed": (
        "Kafka's share-partition leader writes the state with the start offset it had before "
        "the acknowledgements it writes (they count as delivered), and moves it only in memory "
        "until the next write; Rafka writes the start offset past them. Both show lag 0"
    ),
}
