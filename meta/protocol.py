"""Constants of the meta service's wire protocol, shared by the service and its client."""

from __future__ import annotations

from enum import IntEnum

# Trailing metadata of a FAILED_PRECONDITION answer: the gRPC host:port of the Raft leader.
LEADER_METADATA_KEY = "rafka-meta-leader"


class ErrorCode(IntEnum):
    """Kafka protocol error codes the service answers with (values of Kafka's ``Errors``)."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    STALE_BROKER_EPOCH = 77
    UNKNOWN_TOPIC_ID = 100
    BROKER_ID_NOT_REGISTERED = 102
