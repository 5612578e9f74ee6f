from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.log.batch import Compression
from dataplane.log.records import record_timestamps
from tests.unit.log.batches import make_batch


@pytest.mark.parametrize("xerial", [False, True])
@pytest.mark.parametrize("codec", list(Compression))
def test_record_timestamps_of_every_codec(codec: Compression, xerial: bool) -> None:
    values = [bytes([i]) * 5_000 for i in range(20)]  # > one 32 KiB xerial block
    stamps = [1_000 + (i * 7919) % 500 for i in range(20)]
    batch = make_batch(values, timestamps=stamps, base_offset=40, codec=codec, xerial=xerial)
    assert list(record_timestamps(batch)) == [(40 + i, ts) for i, ts in enumerate(stamps)]


@given(
    st.lists(st.tuples(st.binary(max_size=300), st.integers(0, 2**40)), min_size=1, max_size=20),
    st.sampled_from(list(Compression)),
)
def test_record_timestamps_roundtrip(records: list[tuple[bytes, int]], codec: Compression) -> None:
    values, stamps = [v for v, _ in records], [t for _, t in records]
    batch = make_batch(values, timestamps=stamps, codec=codec)
    assert list(record_timestamps(batch)) == list(enumerate(stamps))
