"""Constants of the meta service's wire protocol, shared by the service and its client."""

from __future__ import annotations

from enum import IntEnum

# Trailing metadata of a FAILED_PRECONDITION answer: the gRPC host:port of the Raft leader.
LEADER_METADATA_KEY = "rafka-meta-leader"


class ErrorCode(IntEnum):
    """Kafka protocol error codes the service answers with (values of Kafka's ``Errors``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_TOPIC_EXCEPTION = 17
    UNSUPPORTED_SASL_MECHANISM = 33
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_EXPIRED = 66
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    UNKNOWN_TOPIC_ID = 100
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107
    INVALID_UPDATE_VERSION = 108
