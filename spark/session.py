"""A SparkSession wired for Kafka: Rafka's shim jar on spark.jars and its Python source
registered. On a Spark that has the official connector (its jar in spark.jars, --packages or
SPARK_HOME/jars), the same session uses that connector and the pipeline runs on it unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from .connector import register, shim


def rafka_spark_session(
    app_name: str = "rafka-pipeline",
    master: str | None = None,
    conf: dict[str, str] | None = None,
    extra_jars: list[str] | None = None,
) -> Any:
    from pyspark.sql import SparkSession

    # Workers must run this interpreter (its venv has pyarrow, confluent-kafka and this
    # package), whether or not the venv is activated.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    jars = list(extra_jars or [])
    try:
        jars.append(str(shim.build_jar()))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        # No JDK (a Spark cluster image may have only a JRE): fine where the official
        # connector is installed; register() below says so otherwise.
        print(f"warning: Rafka's kafka.DefaultSource shim not built: {e}", file=sys.stderr)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("SPARK_MASTER", "local[2]"))
        .config("spark.jars", ",".join(jars))
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
    )
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
    register(spark)
    return spark
