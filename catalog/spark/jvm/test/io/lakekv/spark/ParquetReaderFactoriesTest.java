package io.lakekv.spark;

import static io.lakekv.spark.Checks.check;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.FileStatusCache;
import org.apache.spark.sql.execution.datasources.InMemoryFileIndex;
import org.apache.spark.sql.execution.datasources.PartitionSpec;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetPartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScan;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScanBuilder;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

import java.io.File;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Unit tests of {@link ParquetReaderFactories} in a local Spark: which scans
 * share a reader factory's broadcast, and that a shared factory is the one
 * Spark would make but for the broadcast. Run by
 * tests/spark/test_plugin_jvm.py through {@code spark-submit} (which gives
 * the JVM the module options Spark needs), with a scratch directory as its
 * argument; exit status 1 on a failure.
 */
public final class ParquetReaderFactoriesTest {
    private static ParquetScan scan(SparkSession spark, String dir, StructType schema, StructType required, Filter... filters) {
        List<Path> paths = List.of(new Path(dir));
        scala.collection.immutable.Map<String, String> none = scala.collection.immutable.Map.from(CollectionConverters.asScala(Map.<String, String>of()));
        InMemoryFileIndex index = new InMemoryFileIndex(spark, CollectionConverters.asScala(paths).toList(), none,
                Option.apply(schema), FileStatusCache.getOrCreate(spark), Option.apply(PartitionSpec.emptySpec()), Option.empty());
        ParquetScanBuilder builder = new ParquetScanBuilder(spark, index, schema, schema, CaseInsensitiveStringMap.empty());
        builder.pruneColumns(required);
        builder.pushedDataFilters_$eq(builder.pushDataFilters(filters));
        return (ParquetScan) builder.build();
    }

    private static ParquetPartitionReaderFactory factory(ParquetScan scan) {
        return (ParquetPartitionReaderFactory) ParquetReaderFactories.forScan(scan);
    }

    private static Map<String, String> content(ParquetPartitionReaderFactory factory) {
        Map<String, String> content = new TreeMap<>();
        for (Map.Entry<String, String> entry : (Configuration) factory.broadcastedConf().value().value()) {
            content.put(entry.getKey(), entry.getValue());
        }
        return content;
    }

    public static void main(String[] args) throws Exception {
        File dir = args.length > 0 ? new File(args[0]) : Files.createTempDirectory("lakekv-reader-factories").toFile();
        String table = new File(dir, "t").getPath();
        SparkSession spark = (SparkSession) SparkSession.builder().master("local[1]").appName("reader-factories")
                .config("spark.ui.enabled", "false").getOrCreate();
        spark.range(10).selectExpr("id", "CAST(id AS STRING) AS s").write().parquet(table);
        StructType schema = spark.read().parquet(table).schema();
        StructType ids = new StructType().add(schema.apply("id"));

        ParquetPartitionReaderFactory first = factory(scan(spark, table, schema, ids, new GreaterThan("id", 3L)));
        ParquetPartitionReaderFactory second = factory(scan(spark, table, schema, ids, new LessThan("id", 5L)));
        check("same settings and columns: one broadcast", second.broadcastedConf() == first.broadcastedConf(), true);
        check("each scan keeps its own filters", Arrays.toString(second.filters()), "[LessThan(id,5)]");

        ParquetPartitionReaderFactory own = (ParquetPartitionReaderFactory) scan(spark, table, schema, ids, new LessThan("id", 5L))
                .createReaderFactory();
        check("the shared factory is Spark's own but for the broadcast",
                second.copy(own.sqlConf(), own.broadcastedConf(), second.dataSchema(), second.readDataSchema(),
                        second.partitionSchema(), own.filters(), second.aggregation(), own.options()).equals(own)
                        && Arrays.equals(second.filters(), own.filters())
                        && second.options().datetimeRebaseModeInRead().equals(own.options().datetimeRebaseModeInRead())
                        && second.options().int96RebaseModeInRead().equals(own.options().int96RebaseModeInRead()), true);
        check("and its broadcast holds the settings Spark's would", content(second).equals(content(own)), true);

        StructType strings = new StructType().add(schema.apply("s"));
        ParquetPartitionReaderFactory otherColumns = factory(scan(spark, table, schema, strings));
        check("other columns: another broadcast", otherColumns.broadcastedConf() != first.broadcastedConf(), true);
        check("which requests those columns",
                content(otherColumns).get("org.apache.spark.sql.parquet.row.requested_schema").contains("\"s\""), true);

        spark.conf().set("spark.sql.parquet.enableVectorizedReader", "false");
        ParquetPartitionReaderFactory changed = factory(scan(spark, table, schema, ids));
        check("a changed setting: another broadcast", changed.broadcastedConf() != first.broadcastedConf(), true);
        check("which carries the setting", content(changed).get("spark.sql.parquet.enableVectorizedReader"), "false");
        spark.conf().unset("spark.sql.parquet.enableVectorizedReader");
        check("the setting back: the first broadcast again",
                factory(scan(spark, table, schema, ids)).broadcastedConf() == first.broadcastedConf(), true);

        spark.stop();
        spark = (SparkSession) SparkSession.builder().master("local[1]").appName("reader-factories-2")
                .config("spark.ui.enabled", "false").getOrCreate();
        ParquetPartitionReaderFactory fresh = factory(scan(spark, table, schema, ids));
        check("a new SparkContext: nothing kept from the stopped one", fresh.broadcastedConf() != first.broadcastedConf(), true);
        spark.stop();

        Checks.finish();
    }
}
