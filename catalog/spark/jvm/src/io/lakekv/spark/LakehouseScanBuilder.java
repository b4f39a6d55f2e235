package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.execution.datasources.FileStatusCache;
import org.apache.spark.sql.execution.datasources.InMemoryFileIndex;
import org.apache.spark.sql.execution.datasources.PartitionSpec;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScan;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScanBuilder;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Plans a scan of a {@link LakehouseTable} at its version and hands the
 * pruned file list to Spark's own (vectorized) Parquet scan.
 *
 * <p>The catalog prunes whole files by partition values and column
 * statistics; Spark's Parquet scan then skips row groups with the same
 * filters, splits files by {@code spark.sql.files.maxPartitionBytes}, reads
 * only the required columns, and matches columns by field id (so renamed,
 * added and dropped columns read right). Every filter is also given back to
 * Spark, which applies it to the rows: pruning only has to be conservative.
 * Each task checks its files against their catalog entries before Spark's
 * reader opens them ({@link PlannedParquetScan}, {@link FileCheck}).
 */
final class LakehouseScanBuilder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns {
    /**
     * Hadoop settings for our scans: Parquet page checksums (every lakehouse file has them) are verified,
     * and row groups are never skipped by their dictionaries. A page's checksum does not cover its
     * header, so a damaged dictionary page header (fewer values) would hide values from Parquet's
     * dictionary filter: a silent wrong answer. Row groups are skipped by the footer's statistics and
     * pages by the page indexes, which the footer-region checksum covers ({@link FileCheck}).
     */
    private static final Map<String, String> PARQUET_OPTIONS = Map.of(
            "parquet.page.verify-checksum.enabled", "true",
            "parquet.filter.dictionary.enabled", "false",
            "spark.sql.parquet.fieldId.read.enabled", "true");

    private final LakehouseTable table;
    /** The UPDATE or MERGE this scan reads for, or null for a query. */
    private final RowLevelRewrite rewrite;
    /** The read's options ({@link IncrementalRead}): an incremental read, or a stream's settings; null for none. */
    private final IncrementalRead read;
    /** A plan already made (a stream's micro-batch), or null: the builder asks the control plane. */
    private final JsonNode given;
    private Filter[] pushed = new Filter[0];
    private StructType required;

    LakehouseScanBuilder(LakehouseTable table, RowLevelRewrite rewrite) {
        this(table, rewrite, null, null);
    }

    LakehouseScanBuilder(LakehouseTable table, RowLevelRewrite rewrite, IncrementalRead read, JsonNode given) {
        this.table = table;
        this.rewrite = rewrite;
        this.read = read;
        this.given = given;
        this.required = table.schema;
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
        this.pushed = filters;
        return filters;  // Spark re-applies all of them to the rows
    }

    @Override
    public Filter[] pushedFilters() {
        return pushed;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
        this.required = requiredSchema;
    }

    @Override
    public Scan build() {
        if (rewrite == null && given == null && calledByStreaming()) {
            // A stream's scan plans each micro-batch itself (VersionStream), not the loaded version.
            return new VersionStream.StreamScan(table, read);
        }
        boolean incremental = given != null || (read != null && read.incremental());
        if (read != null && given == null) {
            read.checkBatch();
        }
        ArrayNode filters = Filters.encode(pushed);
        JsonNode plan = given != null ? given
                : incremental ? read.plan(table, read.start, read.end != null ? read.end : table.version)
                : table.catalog.scanPlans().plan(table, filters);
        QueryReads.record(table, filters);
        if (rewrite != null) {
            rewrite.scanned(plan, filters);  // refuses files without field ids: no Python scan for a rewrite
        } else if (!plan.path("parquet_field_ids").asBoolean(false)) {
            if (incremental) {
                throw IncrementalRead.invalid("table " + table.name() + " has data files written without Parquet field"
                        + " ids (before lakekv recorded them), which only a full read of the table takes");
            }
            return pythonScan();
        }

        String root = table.dataRoot.endsWith("/") ? table.dataRoot : table.dataRoot + "/";
        String tableName = String.join(".", table.nameParts);
        Map<Path, FileStatus[]> statuses = new HashMap<>();
        Map<Path, FileCheck> checks = new HashMap<>();
        List<Path> paths = new ArrayList<>();
        long rows = 0;
        for (JsonNode file : plan.get("files")) {
            rows += file.path("rows").asLong();
            Path path = new Path(root + file.get("path").asText());
            // The catalog knows every file's size: no listing, no HEAD per file.
            statuses.put(path, new FileStatus[] {new FileStatus(file.get("size").asLong(), false, 1, 128L << 20, 0L, path)});
            checks.put(path, FileCheck.fromPlan(file, tableName));
            paths.add(path);
        }
        SparkSession session = SparkSession.active();
        Map<String, String> options = new HashMap<>(PARQUET_OPTIONS);
        // How this JVM reaches the store (S3A's endpoint and keys for an s3a: root): the scan's
        // Hadoop configuration, broadcast to its tasks, carries them; the session's does not.
        options.putAll(table.catalog.hadoopSettings(table.dataRoot));
        InMemoryFileIndex index = new InMemoryFileIndex(
                session,
                CollectionConverters.asScala(paths).toList(),
                scala.collection.immutable.Map.from(CollectionConverters.asScala(options)),
                Option.apply(table.schema),
                new PlannedFiles(statuses),
                Option.apply(PartitionSpec.emptySpec()),
                Option.empty());
        ParquetScanBuilder parquet = new ParquetScanBuilder(
                session, index, table.schema, table.schema, new CaseInsensitiveStringMap(options));
        parquet.pruneColumns(required);
        if (rewrite == null) {
            // A rewrite must read every row of its files: no row group skipped.
            parquet.pushedDataFilters_$eq(parquet.pushDataFilters(pushed));
        }
        return new PlannedParquetScan((ParquetScan) parquet.build(), rows, checks, rewrite == null);
    }

    /**
     * Whether Spark's streaming engine (MicroBatchExecution) is building this scan. Spark builds a
     * stream's scan as it builds a batch scan (newScanBuilder, pruneColumns, build) and then asks it
     * for a MicroBatchStream; nothing in the builder's calls tells the two apart, so its caller does.
     * Anything else that built a {@link VersionStream.StreamScan} would still read right through its
     * {@code toBatch}.
     */
    private static boolean calledByStreaming() {
        return StackWalker.getInstance().walk(frames -> frames
                .dropWhile(f -> f.getClassName().equals(LakehouseScanBuilder.class.getName()))
                .findFirst()
                .map(f -> f.getClassName().startsWith("org.apache.spark.sql.execution.streaming."))
                .orElse(false));
    }

    /** The same scan through the Python source (files whose Parquet schema lacks field ids). */
    private Scan pythonScan() {
        CaseInsensitiveStringMap options = table.catalog.pythonSource().readOptions(table);
        ScanBuilder python = ((SupportsRead) table.catalog.pythonSource().table(table, options)).newScanBuilder(options);
        if (python instanceof SupportsPushDownFilters filters) {
            filters.pushFilters(pushed);
        }
        return python.build();
    }

    /** The file statuses the plan already knows, so the file index asks the file system nothing. */
    static final class PlannedFiles extends FileStatusCache {
        private final Map<Path, FileStatus[]> files;

        PlannedFiles(Map<Path, FileStatus[]> files) {
            this.files = files;
        }

        @Override
        public Option<FileStatus[]> getLeafFiles(Path path) {
            return Option.apply(files.get(path));
        }

        @Override
        public void putLeafFiles(Path path, FileStatus[] leafFiles) {
            files.put(path, leafFiles);
        }

        @Override
        public void invalidateAll() {
            // Nothing to drop: the plan is fixed for this scan.
        }
    }
}
