"""The vs-Kafka table's arithmetic: medians, the ratio and the floor in each direction."""

from pathlib import Path

from bench.vs_kafka import DISK_MARGIN, Row, Side, log_bytes, run_both, top_up_mb


def test_higher_is_better_meets_its_floor_at_or_above_it() -> None:
    row = Row("1", "MB/s", 1.0, higher_is_better=True)
    row.figures = {"kafka": [100.0, 80.0, 90.0], "rafka": [90.0, 95.0, 91.0]}
    assert row.value("kafka") == 90.0
    assert row.ratio() == 91.0 / 90.0
    assert row.met() == "yes"
    row.figures["rafka"] = [89.0]
    assert row.met() == "NO"


def test_lower_is_better_meets_its_floor_at_or_below_it() -> None:
    row = Row("8", "s", 1.0, higher_is_better=False)
    row.figures = {"kafka": [10.0], "rafka": [10.0]}
    assert row.met() == "yes"
    row.figures["rafka"] = [12.0]
    assert row.met() == "NO"


def test_a_side_not_measured_has_no_ratio() -> None:
    row = Row("3", "MB/s", 0.8, higher_is_better=True)
    row.figures["kafka"] = [50.0]
    assert row.ratio() is None
    assert row.met() == "-"


def _side(name: str, data: Path) -> Side:
    def nothing(*_args: object) -> None:
        return None

    return Side(name, "localhost:0", data, dict, nothing, nothing, nothing)


def test_every_sample_of_a_run_is_a_figure_of_the_median(tmp_path: Path) -> None:
    """Row 8 kills the leader several times per run: the row's figure is the median of every
    kill, not of one."""
    row = Row("8", "s", 1.0, higher_is_better=False)
    sides = [_side("kafka", tmp_path), _side("rafka", tmp_path)]
    kills = {"kafka": [11.0, 10.0, 12.0], "rafka": [1.0, 9.0, 2.0]}
    run_both(row, sides, 0, lambda side: kills[side.name])
    run_both(row, sides, 1, lambda side: 3.0 if side.name == "rafka" else 10.5)
    assert row.figures == {"kafka": [11.0, 10.0, 12.0, 10.5], "rafka": [1.0, 9.0, 2.0, 3.0]}
    assert row.value("kafka") == 10.75
    assert row.value("rafka") == 2.5


def test_a_failed_run_is_the_rows_reason(tmp_path: Path) -> None:
    row = Row("8", "s", 1.0, higher_is_better=False)

    def fails(side: Side) -> float:
        raise RuntimeError(f"no ack on {side.name}")

    run_both(row, [_side("rafka", tmp_path)], 0, fails)
    assert row.failed == {"rafka": "RuntimeError: no ack on rafka"}
    assert row.value("rafka") is None


def test_log_bytes_counts_partition_segments_only(tmp_path: Path) -> None:
    (tmp_path / "broker-1" / "wide-7").mkdir(parents=True)
    (tmp_path / "broker-1" / "wide-7" / "00000000000000000000.log").write_bytes(b"x" * 300)
    (tmp_path / "broker-1" / "wide-7" / "00000000000000001000.log").write_bytes(b"x" * 200)
    (tmp_path / "broker-1" / "wide-7" / "00000000000000000000.index").write_bytes(b"x" * 50)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "broker-1.log").write_bytes(b"x" * 1000)  # the server's own log
    assert log_bytes(_side("rafka", tmp_path)) == 500


def test_the_top_up_shares_the_disk_left_above_the_margin() -> None:
    gb = 10**9
    missing = {"kafka": 2 * gb, "rafka": 3 * gb}
    assert top_up_mb(missing, DISK_MARGIN + 100 * gb) == {"kafka": 2000, "rafka": 3000}
    assert top_up_mb(missing, DISK_MARGIN + 4 * gb) == {"kafka": 2000, "rafka": 2000}
    assert top_up_mb(missing, DISK_MARGIN - gb) == {"kafka": 0, "rafka": 0}
    assert top_up_mb({"kafka": 0, "rafka": 0}, DISK_MARGIN + gb) == {"kafka": 0, "rafka": 0}
