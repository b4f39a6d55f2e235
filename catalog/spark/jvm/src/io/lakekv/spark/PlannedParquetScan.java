package io.lakekv.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.HasPartitionKey;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportPartitioning;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.partitioning.KeyGroupedPartitioning;
import org.apache.spark.sql.connector.read.partitioning.Partitioning;
import org.apache.spark.sql.connector.read.partitioning.UnknownPartitioning;
import org.apache.spark.sql.execution.datasources.FilePartition;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetPartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.internal.connector.SupportsMetadata;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.util.Map;

/**
 * Spark's Parquet scan of the files a query's plan kept, as the query
 * hands it to Spark: the same reads, planned once per query.
 *
 * <p>Three things differ from handing Spark the Parquet scan itself:
 * <ul>
 *   <li>Before Spark's reader opens a file, the task checks it against its
 *       catalog entry ({@link FileCheck}: its footer region's CRC32C, or for
 *       a file from before those the whole file's), so a damaged footer is
 *       an error naming the file, never a row group skipped by a wrong
 *       statistic. Each split carries the checks of its own files.</li>
 *   <li>Its reader factory is made once per scan (Spark asks each copy of
 *       the physical scan node for one) and comes from
 *       {@link ParquetReaderFactories}, which reuses an earlier query's
 *       broadcast of the same settings.</li>
 *   <li>When the kept files are small and fit in one task, the scan says
 *       so. Spark does not know that a V2 scan of one input partition holds
 *       every row in one place, so a global aggregate over it would shuffle
 *       into one partition and run as two stages. Pruning often leaves a
 *       selective query one small split: the scan then reports a
 *       key-grouped partitioning with no key columns over that one
 *       partition, which means exactly "all rows in one partition", and a
 *       global aggregate (or a window) runs in the scan's own task.
 *       "Small" is what adaptive execution would coalesce into one
 *       partition anyway: the planned rows times the read schema's default
 *       row size at most {@code spark.sql.adaptive.advisoryPartitionSizeInBytes},
 *       so nothing that needed a shuffle's parallelism loses it. With
 *       {@code spark.sql.sources.v2.bucketing.shuffle.enabled} Spark would
 *       shuffle the other side of a join into that one partition, so the
 *       scan then reports nothing. A row-level rewrite's scan never claims
 *       it.</li>
 * </ul>
 */
final class PlannedParquetScan implements Scan, Batch, SupportsReportPartitioning, SupportsReportStatistics, SupportsMetadata {
    private final ParquetScan parquet;
    private final InputPartition[] splits;
    private final boolean oneTask;
    private PartitionReaderFactory factory;

    /**
     * {@code plannedRows}: the rows of the files the catalog planned (the plan says each file's);
     * {@code checks}: each planned file's check, by the path the scan reads it by;
     * {@code mayClaimOneTask}: false for a row-level rewrite's scan.
     *
     * @throws IllegalStateException a split reads a file that {@code checks} does not name
     */
    PlannedParquetScan(ParquetScan parquet, long plannedRows, Map<Path, FileCheck> checks, boolean mayClaimOneTask) {
        this.parquet = parquet;
        InputPartition[] planned = parquet.planInputPartitions();
        SQLConf conf = parquet.conf();
        long advisory = (Long) conf.getConf(SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES());
        this.oneTask = mayClaimOneTask
                && planned.length == 1
                && !conf.v2BucketingShuffleEnabled()
                && plannedRows <= advisory / Math.max(1, parquet.readSchema().defaultSize());
        InputPartition[] checked = new InputPartition[planned.length];
        for (int i = 0; i < planned.length; i++) {
            checked[i] = CheckedSplit.of((FilePartition) planned[i], checks);
        }
        this.splits = oneTask ? new InputPartition[] {new KeylessSplit(checked[0])} : checked;
    }

    @Override
    public StructType readSchema() {
        return parquet.readSchema();
    }

    @Override
    public String description() {
        return parquet.description();
    }

    @Override
    public scala.collection.immutable.Map<String, String> getMetaData() {
        return parquet.getMetaData();
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
        return splits.clone();
    }

    @Override
    public synchronized PartitionReaderFactory createReaderFactory() {
        if (factory == null) {
            factory = new Checking(ParquetReaderFactories.forScan(parquet));
        }
        return factory;
    }

    @Override
    public Partitioning outputPartitioning() {
        return oneTask ? new KeyGroupedPartitioning(new Expression[0], 1) : new UnknownPartitioning(splits.length);
    }

    @Override
    public Statistics estimateStatistics() {
        return parquet.estimateStatistics();
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
        return parquet.supportedCustomMetrics();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
        return parquet.reportDriverMetrics();
    }

    @Override
    public ColumnarSupportMode columnarSupportMode() {
        return parquet.columnarSupportMode();
    }

    // Spark compares scans to reuse exchanges and subqueries: two are equal when their Parquet scans are.
    @Override
    public boolean equals(Object other) {
        return other instanceof PlannedParquetScan scan && parquet.equals(scan.parquet);
    }

    @Override
    public int hashCode() {
        return parquet.hashCode();
    }

    /**
     * Threads that check the files of a split on an object store together (daemons, made as
     * needed and dropped after a minute idle): waiting on round trips, not using cores.
     */
    private static final java.util.concurrent.ExecutorService REMOTE_CHECKS = new java.util.concurrent.ThreadPoolExecutor(
            0, 16, 60L, java.util.concurrent.TimeUnit.SECONDS, new java.util.concurrent.SynchronousQueue<>(),
            runnable -> {
                Thread thread = new Thread(runnable, "lakekv-file-check");
                thread.setDaemon(true);
                return thread;
            },
            new java.util.concurrent.ThreadPoolExecutor.CallerRunsPolicy());

    /** The one split, under the empty partition key that every row has. */
    record KeylessSplit(InputPartition split) implements HasPartitionKey {
        @Override
        public InternalRow partitionKey() {
            return new GenericInternalRow(0);
        }

        @Override
        public String[] preferredLocations() {
            return split.preferredLocations();
        }
    }

    /**
     * A split of the Parquet scan with the checks of its files, in the split's order.
     *
     * <p>Only the split's own checks travel with its task, not the whole plan's.
     */
    record CheckedSplit(FilePartition split, FileCheck[] checks) implements InputPartition {
        static CheckedSplit of(FilePartition split, Map<Path, FileCheck> checks) {
            PartitionedFile[] files = split.files();
            FileCheck[] own = new FileCheck[files.length];
            for (int i = 0; i < files.length; i++) {
                own[i] = checks.get(files[i].toPath());
                if (own[i] == null) {
                    throw new IllegalStateException("Spark's Parquet scan reads " + files[i].toPath()
                            + ", which the catalog's scan plan does not list");
                }
            }
            return new CheckedSplit(split, own);
        }

        /**
         * Checks every file of the split (see {@link FileCheck#verify}). A check is a stat and a
         * read of the file's last bytes: on local disk microseconds, on an object store two round
         * trips, which the checks of a split's files then make together rather than one file after
         * another (a split packs many small files).
         */
        void verify(Configuration conf) {
            PartitionedFile[] files = split.files();
            if (files.length < 2 || "file".equals(files[0].toPath().toUri().getScheme())) {
                for (int i = 0; i < files.length; i++) {
                    checks[i].verify(files[i].toPath(), conf);
                }
                return;
            }
            java.util.List<java.util.concurrent.CompletableFuture<Void>> running = new java.util.ArrayList<>();
            for (int i = 0; i < files.length; i++) {
                FileCheck check = checks[i];
                org.apache.hadoop.fs.Path path = files[i].toPath();
                running.add(java.util.concurrent.CompletableFuture.runAsync(() -> check.verify(path, conf), REMOTE_CHECKS));
            }
            for (java.util.concurrent.CompletableFuture<Void> check : running) {
                try {
                    check.join();
                } catch (java.util.concurrent.CompletionException e) {
                    // The check's own error (a CorruptDataFileError naming the file, a storage error).
                    throw e.getCause() instanceof RuntimeException cause ? cause : e;
                }
            }
        }

        @Override
        public String[] preferredLocations() {
            return split.preferredLocations();
        }
    }

    /**
     * The Parquet reader factory, given back the Parquet scan's own split once the
     * split's files passed their checks: a task returns no row of a file that fails.
     *
     * <p>The files are checked when the task asks for its reader, before Spark's
     * reader reads any footer (it opens each file when it gets to it), with the
     * Hadoop configuration Spark's reader opens them with.
     */
    record Checking(ParquetPartitionReaderFactory parquet) implements PartitionReaderFactory {
        private static CheckedSplit checked(InputPartition partition) {
            return (CheckedSplit) (partition instanceof KeylessSplit keyless ? keyless.split() : partition);
        }

        private FilePartition verified(InputPartition partition) {
            CheckedSplit split = checked(partition);
            split.verify(parquet.broadcastedConf().value().value());
            return split.split();
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            return parquet.createReader(verified(partition));
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return parquet.createColumnarReader(verified(partition));
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return parquet.supportColumnarReads(checked(partition).split());
        }
    }
}
