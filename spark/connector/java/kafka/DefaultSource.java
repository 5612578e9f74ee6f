package kafka;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.catalyst.plans.logical.AppendData;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.CommandExecutionMode;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * format("kafka") when Spark's official Kafka connector is not on the classpath.
 *
 * <p>DataSource.lookupDataSource("kafka") first asks ServiceLoader for a DataSourceRegister
 * named "kafka" (the official connector's KafkaSourceProvider), then tries to load the classes
 * "kafka" and "kafka.DefaultSource". So this class is found only when the official connector is
 * absent, and then it is a Python data source: Spark calls setShortName("kafka") on it and
 * serves the read or write with the Python data source registered under that name (Rafka's,
 * spark.connector.KafkaDataSource).
 *
 * <p>Batch writes are the exception. DataFrameWriter.save() refuses a V2 table that supports
 * BATCH_WRITE in its default mode, ErrorIfExists, while the official connector (which Spark
 * always writes through its V1 interface, "kafka" being in spark.sql.sources.useV1SourceList)
 * takes it. So the tables this class hands to Spark do not claim BATCH_WRITE, which makes every
 * batch save() fall back to createRelation below, and that does what the official
 * KafkaSourceProvider.createRelation does with the save mode before handing the rows to the
 * Python writer.
 */
public class DefaultSource extends PythonDataSourceV2 implements CreatableRelationProvider {
    /** The name spark.connector.register() gives the Python data source. */
    private static final String PYTHON_SOURCE = "kafka";

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> props) {
        // Still a PythonTable, so reads and streaming writes work as before; only the claim of
        // batch writes is dropped (see the class comment).
        String name = super.getTable(schema, partitioning, props).name();
        return new PythonTable(this, name, schema) {
            @Override
            public Set<TableCapability> capabilities() {
                Set<TableCapability> capabilities = EnumSet.copyOf(super.capabilities());
                capabilities.remove(TableCapability.BATCH_WRITE);
                return capabilities;
            }
        };
    }

    @Override
    public BaseRelation createRelation(
            SQLContext sqlContext,
            SaveMode mode,
            scala.collection.immutable.Map<String, String> parameters,
            Dataset<Row> data) {
        if (mode == SaveMode.Overwrite || mode == SaveMode.Ignore) {
            // The official connector's error, so pipelines see the same failure either way.
            Map<String, String> args = Map.of(
                    "mode", mode.toString(),
                    "append", SaveMode.Append.toString(),
                    "errorIfExists", SaveMode.ErrorIfExists.toString());
            throw sneakyThrow(new AnalysisException(
                    "_LEGACY_ERROR_TEMP_3081",
                    scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(args))));
        }
        // Spark reaches this through a fresh instance (DataSource.providingInstance) that it
        // never names, and the Python source is registered under one name only.
        setShortName(PYTHON_SOURCE);
        // Append the rows to the Python table that does claim BATCH_WRITE, as DataFrameWriter
        // does for mode("append") on a V2 source, so the Python writer serves them.
        org.apache.spark.sql.classic.Dataset<Row> df = (org.apache.spark.sql.classic.Dataset<Row>) data;
        Map<String, String> options = CollectionConverters.asJava(parameters);
        Table table = super.getTable(df.schema().asNullable(), new Transform[0], options);
        DataSourceV2Relation relation = DataSourceV2Relation.create(
                table, Option.empty(), Option.empty(), new CaseInsensitiveStringMap(options),
                Option.empty());
        AppendData append = AppendData.byName(relation, df.logicalPlan(), parameters, false);
        df.sparkSession().sessionState()
                .executePlan(append, CommandExecutionMode.ALL())
                .assertCommandExecuted();
        // What was written cannot be read back as a relation; Spark only uses this to refresh
        // caches and ignores the failure, as with the official connector's.
        return new BaseRelation() {
            @Override
            public SQLContext sqlContext() {
                return sqlContext;
            }

            @Override
            public StructType schema() {
                throw new UnsupportedOperationException(
                        "BaseRelation from Kafka write operation is not usable.");
            }
        };
    }

    /**
     * Throws `e` unchecked: AnalysisException is a checked exception to javac, and the Scala
     * createRelation it is thrown from declares none (Scala has no checked exceptions).
     */
    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneakyThrow(Throwable e) throws E {
        throw (E) e;
    }
}
