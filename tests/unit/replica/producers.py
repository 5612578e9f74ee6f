"""A partition log with its producer state, driven the way the broker drives them."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from dataplane.log import LogConfig, PartitionLog, StateStore, validate
from dataplane.log.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from dataplane.replica.producer_state import ProducerStateManager
from tests.unit.log.batches import make_batch, values_of
from tests.unit.log.helpers import crash

NOW = 1_700_000_000_000
NEVER = 2**62  # an expiration that never passes


def idem(
    pid: int,
    epoch: int,
    seq: int,
    count: int = 1,
    *,
    ts: int = NOW,
    transactional: bool = False,
    control: bool = False,
    base_offset: int = 0,
) -> bytes:
    """A producer's batch of ``count`` records starting at sequence ``seq``."""
    attributes = (ATTR_TRANSACTIONAL if transactional else 0) | (ATTR_CONTROL if control else 0)
    return make_batch(
        values_of(count, 20, seq),
        timestamps=[ts] * count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        extra_attributes=attributes,
        base_offset=base_offset,
    )


def plain(count: int = 1, ts: int = NOW) -> bytes:
    return make_batch(values_of(count, 20), timestamps=[ts] * count)


class Produced(NamedTuple):
    base_offset: int
    last_offset: int
    duplicate: bool
    written: bytes  # the batch as appended (b"" for a duplicate), for a follower


class Replica:
    """One replica: log + producer state, as leader (`produce`) or follower (`replicate`)."""

    def __init__(
        self,
        directory: Path,
        store: StateStore,
        key: str,
        config: LogConfig | None = None,
        expiration_ms: int = NEVER,
    ) -> None:
        self.directory, self.store, self.key = directory, store, key
        self.config = config or LogConfig()
        self.expiration_ms = expiration_ms
        self.log: PartitionLog
        self.producers: ProducerStateManager
        self.open()

    def open(self, now_ms: int = NOW) -> None:
        self.log = PartitionLog.open(self.directory, self.config, self.store, self.key)
        self.producers = ProducerStateManager.load(self.log, self.expiration_ms, now_ms=now_ms)

    def close(self, *, clean: bool = True) -> None:
        """Clean: snapshot, then close the log. Unclean: as a killed process (no snapshot)."""
        if clean:
            self.producers.snapshot()
            self.log.close()
        else:
            crash(self.log)

    def reopen(self, *, clean: bool = True, now_ms: int = NOW) -> None:
        self.close(clean=clean)
        self.open(now_ms)

    def produce(self, records: bytes, now_ms: int = NOW) -> Produced:
        """The leader's produce path: validate, check, append, update."""
        infos = self.log.validate(records, now_ms)
        dup = self.producers.check(infos)
        if dup is not None:
            return Produced(dup.first_offset, dup.last_offset, True, b"")
        buf = bytearray(records)
        result = self.log.append_as_leader(buf, 0, now_ms, validated=infos)
        self.producers.update(result.batches)
        return Produced(result.base_offset, result.last_offset, False, bytes(buf))

    def write_as_coordinator(self, records: bytes, now_ms: int = NOW) -> bytes:
        """A broker-internal leader append (control batches allowed), no producer check."""
        buf = bytearray(records)
        result = self.log.append_as_leader(buf, 0, now_ms, from_client=False)
        self.producers.update(result.batches)
        return bytes(buf)

    def replicate(self, data: bytes) -> None:
        """The follower's path: append the leader's bytes, update."""
        self.producers.update(self.log.append_as_follower(data).batches)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.producers.truncate_and_reload(now_ms=NOW)

    def state(self) -> dict[int, tuple]:
        return export(self.producers)

    def log_batches(self) -> list:
        return list(self.log.batches_from(0))


def export(producers: ProducerStateManager) -> dict[int, tuple]:
    """The state as plain values: pid -> (epoch, batches, last timestamp, txn first offset)."""
    return {
        pid: (e.epoch, tuple(e.batches), e.last_timestamp, e.current_txn_first_offset)
        for pid, e in producers.producers.items()
    }


def headers(data: bytes) -> list:
    return validate(data, None, from_client=False)
