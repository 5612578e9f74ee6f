"""The vs-Kafka table's arithmetic: medians, the ratio and the floor in each direction."""

from bench.vs_kafka import Row


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
