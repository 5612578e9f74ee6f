"""Driving a PartitionLog in tests."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

from dataplane.log import PartitionLog, validate
from dataplane.log.cleaner import CleaningJob
from dataplane.log.records import decode_records
from tests.unit.log.batches import make_batch, values_of


def append(
    log: PartitionLog,
    batches: int,
    per_batch: int = 3,
    *,
    epoch: int = 0,
    now_ms: int = 10_000,
    size: int = 100,
) -> list[bytes]:
    """Append ``batches`` batches; return each as written (offsets and epoch patched in)."""
    written = []
    for _ in range(batches):
        start = log.log_end_offset
        buf = bytearray(make_batch(values_of(per_batch, size, start), timestamps=None))
        log.append_as_leader(buf, epoch, now_ms)
        written.append(bytes(buf))
    return written


def offsets_in(data: bytes) -> list[tuple[int, int]]:
    return [(i.base_offset, i.last_offset) for i in validate(data, None, from_client=False)]


def read_all(log: PartitionLog) -> bytes:
    """Everything from the log start, one segment per read as a consumer would."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30, log.log_end_offset, True)
        out.append(data)
        offset = offsets_in(data)[-1][1] + 1
    return b"".join(out)


def crash(log: PartitionLog) -> None:
    """Drop a log as a killed process would leave it: no fsync, no clean-shutdown mark. (The
    files get closed to free them, which also writes out the index buffers a killed process
    would lose; recovery rebuilds those indexes either way.)"""
    log._wait_for_fsync()
    for segment in log._segments:
        segment.close()
    log._closed = True


def records_in(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of whole batches."""
    return [
        (r.offset, r.key, r.value)
        for info in validate(data, None, from_client=False)
        for r in decode_records(data[info.position : info.position + info.size])
    ]


def run_cleaning(job: CleaningJob, log: PartitionLog) -> CleaningJob:
    """What the broker's cleaner task does with a job, in this thread."""
    job.build_offset_map()
    for group in job.groups:
        log.swap_cleaned(job, job.clean_group(group))
    log.finish_cleaning(job)
    return job


def clean(
    log: PartitionLog,
    now_ms: int = 10_000,
    *,
    upper_bound: int | None = None,
    producers: dict[int, tuple[int, int]] | None = None,
) -> CleaningJob | None:
    """Compact ``log`` as the broker would (the last stable offset at the log end unless given;
    ``producers``: pid -> (last data offset or -1, epoch)); None if it needs no cleaning."""
    bound = log.log_end_offset if upper_bound is None else upper_bound
    job = log.plan_cleaning(now_ms, bound, producers or {})
    return None if job is None else run_cleaning(job, log)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def descriptors_left(spare: int = 0) -> Iterator[None]:
    """All but ``spare`` of the descriptors this process may open are taken (RLIMIT_NOFILE
    lowered, the rest filled), as on a broker hosting more files than its open-files limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_descriptors() + 16, hard))
    taken: list[int] = []
    try:
        with contextlib.suppress(OSError):
            while True:
                taken.append(os.open(os.devnull, os.O_RDONLY))
        for _ in range(spare):
            os.close(taken.pop())
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
