"""A process that appends to a partition log forever, reporting each acknowledged append on
stdout as "<base offset> <last offset> <first value>"; the kill -9 test kills it mid-stream."""

from __future__ import annotations

import sys
from pathlib import Path

from dataplane.log import LogConfig, PartitionLog, StateStore
from tests.unit.log.batches import make_batch, values_of

RECORDS_PER_BATCH = 20
CONFIG = LogConfig(segment_bytes=256 * 1024, index_interval_bytes=4096)


def main(root: Path) -> None:
    store = StateStore(root / "state")
    log = PartitionLog.open(root / "log", CONFIG, store, "p")
    n = 0
    while True:
        values = values_of(RECORDS_PER_BATCH, 200, n * RECORDS_PER_BATCH)
        result = log.append_as_leader(make_batch(values), 0, 1_000 + n)
        sys.stdout.write(f"{result.base_offset} {result.last_offset} {values[0].decode()}\n")
        sys.stdout.flush()
        n += 1


if __name__ == "__main__":
    main(Path(sys.argv[1]))
