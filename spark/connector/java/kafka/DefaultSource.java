package kafka;

import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;

/**
 * format("kafka") when Spark's official Kafka connector is not on the classpath.
 *
 * <p>DataSource.lookupDataSource("kafka") first asks ServiceLoader for a DataSourceRegister
 * named "kafka" (the official connector's KafkaSourceProvider), then tries to load the classes
 * "kafka" and "kafka.DefaultSource". So this class is found only when the official connector is
 * absent, and then it is a Python data source: Spark calls setShortName("kafka") on it and
 * serves the read or write with the Python data source registered under that name (Rafka's,
 * spark.connector.KafkaDataSource).
 */
public class DefaultSource extends PythonDataSourceV2 {
}
