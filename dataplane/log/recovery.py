"""Opening a partition directory after a clean close or a crash (Kafka's LogLoader).

What can be wrong after a kill -9: the tail of the log may end in a torn batch (a write() cut
short), and the index files of the segments written since the last fsync may lag their log (their
appends are buffered). Everything before the recovery point was fsynced and is trusted.

So, unless the log was closed cleanly, every segment from the one holding the recovery point on
is re-read batch by batch (lengths, CRC, increasing offsets) and its indexes are rebuilt; the log
is cut at the first bad batch and any later segment is deleted, with a WARNING. Trusted segments
only get their index files sanity-checked; a missing or garbage index is rebuilt from the log.
First of all, a compaction that a crash interrupted is rolled back or completed (cleaner.py).

Transaction indexes (txn_index.py) cannot be rebuilt from a segment alone: an entry needs the
first offset of the aborted transaction, which may lie segments earlier, and the open
transactions of the other producers at its marker. Kafka rebuilds them by replaying the
producer state over the recovered segments; so does this broker, in two steps. First
`load_segments` deletes the ``.txnindex`` of every segment from the first recovered one (or the
first trusted one whose txn index fails its sanity check) to the end, and reports the base
offset of the first of those that needs its entries back: a corrupt one, or a recovered one
holding a control batch (a segment without markers has no entry to lose). Then the partition's
ProducerStateManager replays the batch headers from a snapshot at or below that offset, and each
ABORT marker it meets re-appends its entry; `PartitionLog.append_aborted_txn` skips the entries
the indexes still hold, so a replay never duplicates one. Everything after the first dropped
index is dropped too, so that the indexes left always hold a prefix (in marker order) of the
aborted transactions.

The leader-epoch cache (epoch_cache.py) lives in the state store: if its value is missing (the
store was lost) or unreadable, `rebuild_epoch_cache` reads it back from the batch headers of
every segment (the partition leader epoch of each batch), as Kafka's recovery assigns each
batch's epoch; OffsetForLeaderEpoch and followers' divergence checks answer from it.
"""

from __future__ import annotations

import contextlib
import logging
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path

from dataplane.log.cleaner import finish_interrupted_cleaning
from dataplane.log.epoch_cache import LeaderEpochCache
from dataplane.log.errors import LogError
from dataplane.log.index import CorruptIndexError
from dataplane.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from dataplane.log.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)


def _segment_bases(directory: Path) -> list[int]:
    """Base offsets of the segments in ``directory``; index files without a log are removed."""
    bases = sorted(int(p.stem) for p in directory.glob(f"*{LOG_SUFFIX}") if p.stem.isdigit())
    known = set(bases)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        for path in directory.glob(f"*{suffix}"):
            if path.stem.isdigit() and int(path.stem) not in known:
                path.unlink()
    return bases


def _load_trusted(segment: LogSegment, partition: str) -> bool:
    """Load a segment before the recovery point; False if its transaction index is unsound."""
    try:
        segment.txn_index.sanity_check()
    except CorruptIndexError as e:
        log.warning(
            "partition %s: rebuilding transaction indexes from %s: %s",
            partition,
            segment.path.name,
            e,
        )
        txn_index_ok = False
    else:
        txn_index_ok = True
    try:
        segment.load()
    except CorruptIndexError as e:
        log.warning("partition %s: rebuilding indexes of %s: %s", partition, segment.path.name, e)
        cut = segment.recover()
        if cut:
            log.warning(
                "partition %s: %d corrupt bytes cut from the end of %s (before the recovery point)",
                partition,
                cut,
                segment.path.name,
            )
            txn_index_ok = False  # it may index markers that were cut
    return txn_index_ok


def load_segments(
    directory: Path,
    index_interval_bytes: int,
    recovery_point: int,
    clean: bool,
    partition: str,
    now_ms: int,
) -> tuple[list[LogSegment], int | None]:
    """Open every segment of a partition directory, checking what a crash may have torn.

    ``clean`` (the log was closed cleanly) skips the batch scan entirely. Also returns the
    offset from which the transaction indexes were dropped and must be rebuilt, or None.
    """
    finish_interrupted_cleaning(directory, index_interval_bytes, partition, now_ms)
    bases = _segment_bases(directory)
    segments: list[LogSegment] = []
    try:
        for base in bases:
            segments.append(LogSegment.open(directory, base, index_interval_bytes, now_ms))
        rebuild_from = _recover(directory, segments, bases, recovery_point, clean, partition)
    except BaseException:  # out of descriptors half-way, say: none of them is left open
        for segment in segments:
            with contextlib.suppress(OSError):
                segment.close()
        raise
    return segments, rebuild_from


def _recover(
    directory: Path,
    segments: list[LogSegment],
    bases: list[int],
    recovery_point: int,
    clean: bool,
    partition: str,
) -> int | None:
    """`load_segments` once every segment is open: ``segments`` is cut where recovery cuts the
    log; returns the offset from which the transaction indexes must be rebuilt, or None."""
    first_unsafe = len(segments) if clean else max(bisect_right(bases, recovery_point) - 1, 0)
    txn_reset = first_unsafe  # the txn indexes from this segment on are dropped
    for i, segment in enumerate(segments[:first_unsafe]):
        if not _load_trusted(segment, partition):
            txn_reset = min(txn_reset, i)
    scanned = segments[first_unsafe:]
    scanned_bytes = sum(s.size for s in scanned)
    if scanned:
        log.log(
            logging.INFO if scanned_bytes else logging.DEBUG,
            "%s (partition %s): recovering after an unclean shutdown: scanning %d of %d "
            "segment(s) (%d bytes) from offset %d, after the recovery point %d; the %d "
            "segment(s) (%d bytes) before it are trusted",
            directory.name,
            partition,
            len(scanned),
            len(segments),
            scanned_bytes,
            scanned[0].base_offset,
            recovery_point,
            first_unsafe,
            sum(s.size for s in segments[:first_unsafe]),
        )
    for i in range(first_unsafe, len(segments)):
        segment = segments[i]
        cut = segment.recover()
        if cut:
            later = segments[i + 1 :]
            log.warning(
                "partition %s: torn or corrupt batch at offset %d: cut %d bytes from %s and "
                "deleted %d later segments (%d bytes)",
                partition,
                segment.next_offset,
                cut,
                segment.path.name,
                len(later),
                sum(s.size for s in later),
            )
            for s in later:
                s.delete()
            del segments[i + 1 :]
            break
    for segment in segments[txn_reset:]:
        segment.txn_index.reset()
    rebuild = [
        s.base_offset
        for i, s in enumerate(segments[txn_reset:], txn_reset)
        if i < first_unsafe or s.control_batches
    ]
    return rebuild[0] if rebuild else None


def _batch_epochs(segments: Sequence[LogSegment], partition: str) -> Iterator[tuple[int, int]]:
    """(partition leader epoch, base offset) of each batch of ``segments`` whose epoch differs
    from the one before (the only ones an epoch cache keeps), from batch headers alone. A batch
    that cannot be read ends the walk, with a WARNING."""
    last = None
    for segment in segments:
        try:
            for info in segment.scan_headers():
                if info.partition_leader_epoch != last:
                    last = info.partition_leader_epoch
                    yield last, info.base_offset
        except LogError as e:
            log.warning(
                "partition %s: leader epochs read only up to a bad batch in %s: %s",
                partition,
                segment.path.name,
                e,
            )
            return


def rebuild_epoch_cache(
    cache: LeaderEpochCache, segments: Sequence[LogSegment], partition: str
) -> None:
    """Rebuild ``cache`` from the batch headers of ``segments`` (no record is decoded)."""
    cache.rebuild(_batch_epochs(segments, partition))
    if any(segment.size for segment in segments):
        log.warning(
            "partition %s: no usable leader-epoch checkpoint; rebuilt from the batch headers: "
            "%d epoch(s), the latest %d",
            partition,
            len(cache.entries),
            cache.latest_epoch,
        )
