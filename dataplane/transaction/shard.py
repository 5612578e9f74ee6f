"""The transaction coordinator's state of one `__transaction_state` partition (a `Shard` of
the CoordinatorRuntime): every transactional id hashed to it, rebuilt by replaying the
partition when this broker becomes its leader. The last record of an id wins; a tombstone (the
id expired) removes it. Unknown key versions are skipped, as Kafka does.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio

from dataplane.log.records import Record
from dataplane.protocol.message_codec import CorruptRecord
from dataplane.transaction.records import decode_key, decode_value
from dataplane.transaction.state import TransactionMetadata

log = logging.getLogger("rafka.transaction")


class ShardListener(Protocol):
    """What the coordinator does when a shard starts or stops serving."""

    def shard_loaded(self, shard: TransactionShard) -> None: ...

    def shard_unloaded(self, shard: TransactionShard) -> None: ...


class TransactionShard:
    """The transactional ids of one partition, while this broker leads it at
    `coordinator_epoch` (the partition's leader epoch: the epoch markers carry)."""

    def __init__(
        self, partition_index: int, coordinator_epoch: int, listener: ShardListener | None = None
    ) -> None:
        self.partition_index = partition_index
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loaded = False
        self.unloaded = False
        self.skipped_records = 0
        # background work of this shard (markers, completions), cancelled when it is dropped
        self.scopes: set[anyio.CancelScope] = set()
        self._listener = listener

    def replay(self, record: Record) -> None:
        try:
            transactional_id = decode_key(record.key)
            if transactional_id is None:
                self.skipped_records += 1
                log.warning(
                    "__transaction_state-%d: skipped the record at offset %d: unknown key "
                    "version (a leftover of an aborted upgrade?)",
                    self.partition_index,
                    record.offset,
                )
                return
            metadata = decode_value(transactional_id, record.value)
        except CorruptRecord as e:  # UnknownVersion included
            self.skipped_records += 1
            log.error(
                "__transaction_state-%d: skipped the corrupt record at offset %d: %s",
                self.partition_index,
                record.offset,
                e,
            )
            return
        if metadata is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = metadata

    def on_loaded(self) -> None:
        self.loaded = True
        if self._listener is not None:
            self._listener.shard_loaded(self)

    def on_unloaded(self) -> None:
        self.unloaded = True
        for scope in list(self.scopes):
            scope.cancel()
        self.scopes.clear()
        if self._listener is not None:
            self._listener.shard_unloaded(self)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)
