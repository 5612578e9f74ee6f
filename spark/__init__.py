"""Rafka's Spark pipeline: the order pipeline (pipeline/) on Spark's official Kafka connector,
and the SparkSession that carries it (session.py). See the README's "Spark pipeline" section."""
