"""Feature levels (Kafka's `metadata.version`-style features, KIP-584): which this broker
supports and which the cluster has finalized.

The finalized levels live in the meta service's Raft state, changed by UpdateFeatures and
followed by every broker through its metadata cache. Until they have been set there (a cluster
that predates them), the broker setting `transaction.version` stands in for the finalized
`transaction.version` level (its bootstrap value, as Kafka's `kafka-storage format
--feature`), so an existing cluster keeps behaving as configured.

What each level switches: `transaction.version` 2 is KIP-890 part 2 (clients use EndTxn v5 and
an epoch bump per transaction; the transaction coordinator writes its records accordingly), 1
and 0 the classic transaction protocol; `group.version` 1 is the KIP-848 consumer group
protocol; `streams.version` 1 the KIP-1071 streams group protocol (StreamsGroupHeartbeat and
StreamsGroupDescribe answer UNSUPPORTED_VERSION below it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from meta.features import SUPPORTED_FEATURES

if TYPE_CHECKING:
    from dataplane.metadata_cache import MetadataCache

__all__ = [
    "STREAMS_VERSION",
    "SUPPORTED_FEATURES",
    "TRANSACTION_VERSION",
    "finalized",
    "level",
    "levels",
]

TRANSACTION_VERSION = "transaction.version"
STREAMS_VERSION = "streams.version"


def levels(cache: MetadataCache, transaction_version: int) -> Mapping[str, int]:
    """The finalized levels: the meta service's once it has any (a feature at level 0 is not
    listed), else the bootstrap value ``transaction_version`` (the broker setting)."""
    if cache.features_epoch >= 0:
        return cache.finalized_features
    return {TRANSACTION_VERSION: transaction_version}


def finalized(cache: MetadataCache, transaction_version: int) -> tuple[Mapping[str, int], int]:
    """(`levels`, their epoch: the metadata offset they were last changed at, or the one the
    broker has read up to while they come from the broker setting)."""
    epoch = cache.features_epoch if cache.features_epoch >= 0 else max(cache.offset, 0)
    return levels(cache, transaction_version), epoch


def level(cache: MetadataCache, name: str, bootstrap_transaction_version: int) -> int:
    """The finalized level of feature ``name`` (0: not finalized, off)."""
    return levels(cache, bootstrap_transaction_version).get(name, 0)
