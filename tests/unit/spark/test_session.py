"""Which jars `rafka_spark_session(jars=...)` puts on spark.jars: a folder's jars or a list, and
never a Kafka connector of another Spark version than pyspark's."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest

from spark.session import connector_jars, connector_package


def test_a_folder_is_its_jars(tmp_path: Path) -> None:
    names = [f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar", "kafka-clients-3.9.2.jar"]
    for name in [*names, "README.txt"]:
        (tmp_path / name).write_text("")
    assert connector_jars(str(tmp_path)) == sorted(str(tmp_path / n) for n in names)
    assert connector_jars(f" {tmp_path / names[1]} ,, /x/y.jar") == [
        str(tmp_path / names[1]),
        "/x/y.jar",
    ]
    assert connector_jars("") == []


def test_a_connector_of_another_spark_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "spark-sql-kafka-0-10_2.13-3.5.1.jar"
    other.write_text("")
    with pytest.raises(
        ValueError, match=r"is Spark's Kafka connector 3\.5\.1, but pyspark is"
    ) as e:
        connector_jars(str(tmp_path))
    assert f"is Spark's Kafka connector 3.5.1, but pyspark is {pyspark.__version__}" in str(e.value)
    assert connector_package() in str(e.value)
    assert connector_package() == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    )
