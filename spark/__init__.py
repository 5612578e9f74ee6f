"""Rafka's Spark pipeline: a Kafka source/sink for PySpark (connector/) and the order pipeline
that runs on it (pipeline/). See the README's "Spark pipeline" section."""
