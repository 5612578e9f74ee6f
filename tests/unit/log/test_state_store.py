from __future__ import annotations

from pathlib import Path

from dataplane.log import StateStore
from dataplane.log.state_store import MAX_OPEN_FILES


def test_typed_values_survive_reopen(tmp_path: Path) -> None:
    with StateStore(tmp_path / "db") as store:
        store.put_int("a/int", -5)
        store.put_bytes("a/bytes", b"\x00\xff")
        store.put_json("a/json", {"epochs": [[1, 0]]})
        store.put_int("a/gone", 1)
        store.delete("a/gone")
    with StateStore(tmp_path / "db") as store:
        assert store.get_int("a/int") == -5
        assert store.get_bytes("a/bytes") == b"\x00\xff"
        assert store.get_json("a/json") == {"epochs": [[1, 0]]}
        assert store.get_int("a/gone") is None
        assert store.get_int("missing", 7) == 7
        assert store.get_json("missing", []) == []


def test_prefix_scan_and_delete_leave_neighbours_alone(tmp_path: Path) -> None:
    with StateStore(tmp_path / "db", sync=True) as store:
        for key in ("log/t-1/a", "log/t-1/b", "log/t-10/a", "log/t-2/a", "log/t-1"):
            store.put_int(key, 1)
        assert [k for k, _ in store.scan_prefix("log/t-1/")] == ["log/t-1/a", "log/t-1/b"]
        store.delete_prefix("log/t-1/")
        assert [k for k, _ in store.scan_prefix("log/")] == ["log/t-1", "log/t-10/a", "log/t-2/a"]


def test_rocksdb_keeps_a_bounded_number_of_files_open(tmp_path: Path) -> None:
    """RocksDB's max_open_files is applied (its default, -1, keeps every table file open)."""
    with StateStore(tmp_path / "db"):
        pass
    (options,) = sorted((tmp_path / "db").glob("OPTIONS-*"))[-1:]
    settings = dict(
        line.strip().split("=", 1) for line in options.read_text().splitlines() if "=" in line
    )
    assert settings["max_open_files"] == str(MAX_OPEN_FILES)
