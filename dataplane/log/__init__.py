"""Partition log storage: Kafka's log layout and semantics, batches stored exactly as received.

Start with `PartitionLog` (partition_log.py); batch.py explains what is checked on append.
"""

from dataplane.log.batch import BatchInfo, Compression, RecordError, validate
from dataplane.log.errors import ErrorCode, LogError, UnexpectedAppendOffsetError
from dataplane.log.log_config import LogConfig
from dataplane.log.partition_log import AppendResult, PartitionLog
from dataplane.log.state_store import StateStore

__all__ = [
    "AppendResult",
    "BatchInfo",
    "Compression",
    "ErrorCode",
    "LogConfig",
    "LogError",
    "PartitionLog",
    "RecordError",
    "StateStore",
    "UnexpectedAppendOffsetError",
    "validate",
]
