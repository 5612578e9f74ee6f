"""A SparkSession wired for Kafka through Spark's official connector, spark-sql-kafka-0-10 at
the installed pyspark's version (the two must match: the connector uses Spark internals).

Where the connector comes from (`jars`):
- None (the default): Spark resolves it from Maven Central as `spark-submit --packages` does
  (`spark.jars.packages`, cached in ~/.ivy2);
- a folder of jars, or jar paths separated by commas: put on `spark.jars` as they are (the
  tests use the folder tests/peers/setup.sh fills with Maven: .cache/peers/spark);
- "": nothing added, for a Spark whose classpath has the connector already (SPARK_HOME/jars).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
_CONNECTOR_JAR = re.compile(r"spark-sql-kafka-0-10_2\.13-(.+)\.jar")


def connector_package() -> str:
    """The Maven coordinate of the connector that matches the installed pyspark."""
    import pyspark

    return f"{CONNECTOR}:{pyspark.__version__}"


def connector_jars(jars: str) -> list[str]:
    """`jars` (a folder, or paths separated by commas) as a list of jar paths. A connector jar
    of another Spark version than pyspark's is refused: it would fail later, deep in a query,
    with a NoSuchMethodError."""
    import pyspark

    paths: list[str] = []
    for item in filter(None, (j.strip() for j in jars.split(","))):
        path = Path(item)
        paths += sorted(map(str, path.glob("*.jar"))) if path.is_dir() else [item]
    for p in paths:
        m = _CONNECTOR_JAR.fullmatch(Path(p).name)
        if m and m.group(1) != pyspark.__version__:
            raise ValueError(
                f"{p} is Spark's Kafka connector {m.group(1)}, but pyspark is "
                f"{pyspark.__version__}: use the connector of pyspark's version "
                f"({connector_package()})"
            )
    return paths


def rafka_spark_session(
    app_name: str = "rafka-pipeline",
    master: str | None = None,
    conf: dict[str, str] | None = None,
    jars: str | None = None,
) -> Any:
    from pyspark.sql import SparkSession

    # Workers must run this interpreter (its venv has this package), whether or not the venv
    # is activated.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("SPARK_MASTER", "local[2]"))
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
    )
    if jars is None:
        builder = builder.config("spark.jars.packages", connector_package())
    elif jars:
        builder = builder.config("spark.jars", ",".join(connector_jars(jars)))
    conf = dict(conf or {})
    # Spark's StreamExecution matches a regex against the message of an exception raised by a
    # stopped foreachBatch (a Python traceback); with the default 1 MB thread stack that
    # overflows and kills the stream thread instead of ending it cleanly.
    java_opts = conf.pop("spark.driver.extraJavaOptions", "")
    builder = builder.config("spark.driver.extraJavaOptions", f"-Xss32m {java_opts}".strip())
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return spark
