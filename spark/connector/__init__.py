"""Rafka's Spark connector for Kafka: `format("kafka")` where Spark's official connector jar is
not installed.

    from spark.connector import register, shim
    spark = (SparkSession.builder.config("spark.jars", str(shim.build_jar())).getOrCreate())
    register(spark)        # "kafka.DefaultSource": ours; anything else: the official connector
    spark.read.format("kafka").option("kafka.bootstrap.servers", ...).option("subscribe", ...)

`spark.session.rafka_spark_session()` does both.
"""

from __future__ import annotations

from typing import Any

from .source import KafkaDataSource

SHIM_CLASS = "kafka.DefaultSource"

__all__ = ["SHIM_CLASS", "KafkaDataSource", "kafka_provider", "lookup_provider", "register"]


# The conditions of DataSource.lookupDataSource's "no provider found" errors: the one it raises
# for "kafka", and the general one.
_NOT_FOUND = {"KAFKA_DATA_SOURCE_NOT_ENABLED", "DATA_SOURCE_NOT_FOUND"}


def lookup_provider(spark: Any, name: str) -> str | None:
    """The class Spark resolves format(name) to (DataSource.lookupDataSource), or None when
    nothing provides it. Any other failure (a provider class that does not load, such as a shim
    built against another Spark) is raised."""
    from py4j.java_gateway import is_instance_of
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().conf()
    try:
        cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(name, conf)
    except Py4JJavaError as e:
        err = e.java_exception
        throwable = is_instance_of(
            spark.sparkContext._gateway, err, "org.apache.spark.SparkThrowable"
        )
        if throwable and err.getCondition() in _NOT_FOUND:
            return None
        raise
    return str(cls.getName())


def kafka_provider(spark: Any) -> str | None:
    """The class Spark resolves format("kafka") to, or None when nothing provides it."""
    return lookup_provider(spark, "kafka")


def register(spark: Any, force: bool = False) -> str:
    """Make format("kafka") work in this session; returns the provider class it resolves to.

    If Spark resolves "kafka" to something other than our `kafka.DefaultSource` (the official
    connector, found first through its DataSourceRegister), nothing is registered and that
    connector serves the pipeline unchanged. Otherwise the Python source is put in the
    session's DataSourceManager under "kafka". (spark.dataSource.register() refuses the name
    because lookupDataSource("kafka") already resolves, to our shim, so this goes one level
    down, to the call register() itself ends in.) `force` registers it whatever "kafka"
    resolves to (the precedence test uses it to show the official connector still wins).
    """
    provider = kafka_provider(spark)
    if provider is None:
        raise RuntimeError(
            "format('kafka') resolves to nothing: put the official spark-sql-kafka-0-10 jar or "
            "Rafka's shim jar (spark.connector.shim.build_jar()) on spark.jars"
        )
    if provider != SHIM_CLASS and not force:
        return provider
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    if not manager.dataSourceExists(KafkaDataSource.name()):
        from pyspark.sql.udf import _wrap_function

        sc = spark.sparkContext
        wrapped = _wrap_function(sc, KafkaDataSource)
        python_ds = getattr(
            sc._jvm,
            "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource",
        )(wrapped)
        manager.registerDataSource(KafkaDataSource.name(), python_ds)
    return provider
