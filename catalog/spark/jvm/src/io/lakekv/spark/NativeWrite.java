package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.distributions.Distribution;
import org.apache.spark.sql.connector.expressions.SortOrder;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.RequiresDistributionAndOrdering;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;
import scala.jdk.javaapi.CollectionConverters;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.function.Function;
import java.util.zip.CRC32C;

/**
 * Rows written by Spark's own Parquet writer (no Python in the tasks) as new
 * data files under the table's location, committed once by the control plane.
 *
 * <p>Each file holds one partition's rows (the write asks Spark to sort each
 * task's rows by the partition columns and starts a new file when they
 * change), carries the table's field ids in its Parquet schema, and is
 * described to the catalog by its path and CRC32C; the catalog reads sizes,
 * row counts, statistics and partition values from the footers. A task that
 * fails deletes every file it created, finished or not (one whose opening
 * failed half-way too); a batch job that fails or loses its commit deletes the
 * files its tasks reported and then every other file named with the job's
 * prefix in the table's directory (a task that could not clean up after
 * itself), and {@code lake.gc()} removes any a killed executor wrote later, so
 * no file of a failed job is ever referenced.
 *
 * <p>A streaming query ({@code writeStream.toTable("lake.ns.t")}) commits each
 * micro-batch the same way, once: the commit records the batch id under the
 * query's id (Spark's {@code StreamingQuery.id}, kept in its checkpoint), and
 * the control plane skips a batch that id already committed, so a query
 * restarted after a crash between the catalog's commit and Spark's own commit
 * log does not append that batch twice.
 */
final class NativeWrite implements RequiresDistributionAndOrdering {
    /** Parquet settings the catalog relies on: field ids, microsecond timestamps Python reads the same. */
    private static final Map<String, String> PARQUET_SETTINGS = Map.of(
            "spark.sql.parquet.fieldId.write.enabled", "true",
            "spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS",
            "parquet.page.write-checksum.enabled", "true");
    /**
     * For a {@code file:} store: Hadoop's default local file system writes a ".<name>.crc" beside
     * every file, clutter in the table's directory that no catalog entry names (the catalog keeps
     * its own CRC32C). The cache holds file systems by scheme, not by settings: it would hand back
     * the default one. Not for other stores: S3A buffers its uploads in local files through
     * Hadoop's default local file system, and fails with the raw one.
     */
    private static final Map<String, String> LOCAL_FILE_SETTINGS = Map.of(
            "fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem",
            "fs.file.impl.disable.cache", "true");

    /** Hex digits of a write's file-name prefix (of the 32 of a file name). */
    private static final int JOB_PREFIX_LENGTH = 12;

    /** One file a task wrote: store-relative path and whole-file checksum. */
    record WrittenFile(String path, long crc32c) implements Serializable {
    }

    /** What a task sends to the commit: its files. */
    record Written(List<WrittenFile> files) implements WriterCommitMessage {
    }

    private final LakehouseTable table;
    private final StructType schema;
    private final Function<List<WrittenFile>, ObjectNode> commitRequest;
    /** Spark's id of the writing query: for a streaming query, the same across its restarts. */
    private final String queryId;
    /** The write's options carry {@code checkpointLocation}: only a stream may take them. */
    private final boolean streamOptions;

    NativeWrite(LakehouseTable table, LogicalWriteInfo info, Function<List<WrittenFile>, ObjectNode> commitRequest) {
        this.table = table;
        this.schema = withFieldIds(info.schema(), table.schema);
        this.commitRequest = commitRequest;
        this.queryId = info.queryId();
        this.streamOptions = Options.hasStreamingOption(info.options());
    }

    /** The rows' schema with each column's field id taken from the table's column of that name. */
    private static StructType withFieldIds(StructType rows, StructType tableSchema) {
        StructField[] fields = rows.fields().clone();
        for (int i = 0; i < fields.length; i++) {
            StructField column = tableSchema.apply(fields[i].name());
            fields[i] = new StructField(fields[i].name(), fields[i].dataType(), fields[i].nullable(),
                    new MetadataBuilder().withMetadata(fields[i].metadata()).withMetadata(column.metadata()).build());
        }
        return new StructType(fields);
    }

    /** Spark's writer writes through Hadoop: storage the JVM cannot open takes no such write. */
    static void checkWritable(LakehouseTable table, String what) {
        if ("iceberg".equals(table.properties.get("provider"))) {
            // Its metadata is its Iceberg clients': Spark appends through pyiceberg, never rewrites files.
            throw new LakehouseException.InvalidArgument("invalid_argument", what + " " + table.name()
                    + ": an iceberg table (created over the Iceberg REST API) takes INSERT INTO and DELETE FROM"
                    + " (with a condition that translates exactly) from Spark, not a rewrite of its files;"
                    + " change it with pyiceberg or DuckDB. Nothing was changed");
        }
        if (table.dataRoot == null || table.dataPath == null) {
            throw new LakehouseException.InvalidArgument("invalid_argument", what + " " + table.name()
                    + ": this lakehouse's storage (or a column type) is not one Spark's Parquet writer can write"
                    + " here (S3 needs hadoop-aws in spark.jars, which catalog.spark.spark_jars() gives);"
                    + " only such lakehouses take UPDATE and MERGE. Nothing was changed");
        }
    }

    @Override
    public String description() {
        return "lakehouse Parquet write into " + table.name();
    }

    @Override
    public Distribution requiredDistribution() {
        return WriteOrder.distribution(table, requiredOrdering());
    }

    @Override
    public SortOrder[] requiredOrdering() {
        return WriteOrder.of(table);  // partition columns first: a file per run of equal partition values
    }

    @Override
    public BatchWrite toBatch() {
        if (streamOptions) {
            throw Options.streamingOptionOnBatch(table.name());
        }
        return new Batch(factory());
    }

    @Override
    public StreamingWrite toStreaming() {
        if (table.txn != null) {
            // Spark logs a batch as done once its commit returns: staged in a transaction that is
            // later aborted (or expires), it would be lost and never replayed.
            throw new LakehouseException.InvalidArgument("invalid_argument", "a streaming write into " + table.name()
                    + " inside durable transaction " + table.txn + " is not supported: each micro-batch commits on"
                    + " its own, exactly once; RESET " + table.catalog.transactionKey() + " before starting the stream");
        }
        return new Stream(factory());
    }

    private Factory factory() {
        // Every file of this write starts with it: a failed batch job finds the files of tasks that
        // did not report them. 12 hex digits of a random UUID, then 20 more random ones per file.
        String prefix = UUID.randomUUID().toString().replace("-", "").substring(0, JOB_PREFIX_LENGTH);
        SparkSession session = SparkSession.active();
        Job job;
        try {
            job = Job.getInstance(session.sessionState().newHadoopConf());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        PARQUET_SETTINGS.forEach(job.getConfiguration()::set);
        OutputWriterFactory files = new ParquetFileFormat().prepareWrite(
                session, job, scala.collection.immutable.Map.from(CollectionConverters.asScala(Map.<String, String>of())), schema);
        // prepareWrite copies the session's settings into the job: ours go on top, with how this
        // JVM reaches the store (S3A's endpoint and keys for an s3a: root).
        PARQUET_SETTINGS.forEach(job.getConfiguration()::set);
        table.catalog.hadoopSettings(table.dataRoot).forEach(job.getConfiguration()::set);
        if (table.dataRoot.startsWith("file:")) {
            LOCAL_FILE_SETTINGS.forEach(job.getConfiguration()::set);
        }
        String root = table.dataRoot.endsWith("/") ? table.dataRoot : table.dataRoot + "/";
        int[] partitionOrdinals = Arrays.stream(table.partitionColumns).mapToInt(schema::fieldIndex).toArray();
        DataType[] partitionTypes = Arrays.stream(partitionOrdinals).mapToObj(i -> schema.fields()[i].dataType()).toArray(DataType[]::new);
        return new Factory(files, new SerializableConfiguration(job.getConfiguration()), schema,
                root, table.dataPath, prefix, partitionOrdinals, partitionTypes);
    }

    private final class Batch implements BatchWrite {
        private final Factory factory;

        Batch(Factory factory) {
            this.factory = factory;
        }

        @Override
        public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
            return factory;
        }

        @Override
        public void commit(WriterCommitMessage[] messages) {
            List<WrittenFile> written = writtenFiles(messages);
            try {
                commitFiles(factory, written, commitRequest.apply(written));
            } catch (RuntimeException e) {
                factory.deleteJobFiles();
                throw e;
            }
        }

        @Override
        public void abort(WriterCommitMessage[] messages) {
            factory.delete(writtenFiles(messages));
            factory.deleteJobFiles();  // and those of tasks whose own abort could not delete them
        }
    }

    private final class Stream implements StreamingWrite {
        private final Factory factory;

        Stream(Factory factory) {
            this.factory = factory;
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            return factory;
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
            List<WrittenFile> written = writtenFiles(messages);
            ObjectNode args = commitRequest.apply(written);
            // Each batch commits on top of the previous ones (which are newer than the version the
            // stream loaded the table at) and reads nothing of the catalog's.
            args.remove("reads");
            if (args.get("overwrite") instanceof ObjectNode overwrite) {
                overwrite.remove("read_version");  // complete mode: the batch replaces the table as it is now
            }
            args.putObject("stream").put("query_id", queryId).put("batch", epochId);
            if (commitFiles(factory, written, args).path("duplicate").asBoolean(false)) {
                factory.delete(written);  // this query committed the batch before a restart: its rows are in
            }
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
            factory.delete(writtenFiles(messages));
        }
    }

    /** The control plane's commit of {@code written}; if it did not happen, no file of ours stays. */
    private JsonNode commitFiles(Factory factory, List<WrittenFile> written, ObjectNode args) {
        try {
            return table.catalog.control().call("commit_written", args);
        } catch (RuntimeException e) {
            // The commit did not happen (a conflict, a refusal): no file of ours is referenced.
            factory.delete(written);
            throw e;
        }
    }

    private static List<WrittenFile> writtenFiles(WriterCommitMessage[] messages) {
        List<WrittenFile> out = new ArrayList<>();
        for (WriterCommitMessage message : messages) {
            if (message instanceof Written w) {
                out.addAll(w.files());
            }
        }
        return out;
    }

    /** Made on the driver, run in each task: the Parquet writer's factory and the file layout. */
    private record Factory(OutputWriterFactory files, SerializableConfiguration conf, StructType schema, String root,
                           String dataPath, String filePrefix, int[] partitionOrdinals, DataType[] partitionTypes)
            implements DataWriterFactory, StreamingDataWriterFactory {
        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            TaskAttemptID attempt = new TaskAttemptID(new TaskID(new JobID("lakekv", 0), TaskType.MAP, partitionId), (int) taskId);
            return new Writer(this, new TaskAttemptContextImpl(conf.value(), attempt));
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return createWriter(partitionId, taskId);  // file names are unique: the epoch is only the commit's
        }

        Path absolute(String path) {
            return new Path(root + path);
        }

        /** A new file's store-relative path: the write's prefix and 20 random hex digits (alphanumeric, as the catalog wants). */
        String newFilePath() {
            String random = UUID.randomUUID().toString().replace("-", "").substring(0, 32 - JOB_PREFIX_LENGTH);
            return dataPath + "/" + filePrefix + random + ".parquet";
        }

        /**
         * Delete every file in the table's directory named with this write's prefix. Run on the
         * driver once the job has failed (or lost its commit): none of them is referenced. A task
         * still running then (Spark does not wait for killed tasks) deletes its own files in its
         * abort; a file written after this listing is left to {@code lake.gc()}.
         */
        void deleteJobFiles() {
            Path directory = absolute(dataPath);
            List<WrittenFile> mine = new ArrayList<>();
            try {
                for (FileStatus status : directory.getFileSystem(conf.value()).listStatus(directory)) {
                    String name = status.getPath().getName();
                    if (status.isFile() && name.startsWith(filePrefix) && name.endsWith(".parquet")) {
                        mine.add(new WrittenFile(dataPath + "/" + name, 0));
                    }
                }
            } catch (FileNotFoundException e) {
                return;  // no task created a file
            } catch (IOException e) {
                System.err.println("lakekv: could not list " + directory + " for the files of a failed write"
                        + " (lake.gc() removes them): " + e);
                return;
            }
            delete(mine);
        }

        void delete(List<WrittenFile> written) {
            for (WrittenFile file : written) {
                Path path = absolute(file.path());
                try {
                    path.getFileSystem(conf.value()).delete(path, false);
                } catch (IOException e) {
                    // lake.gc() removes what is left: an unreferenced file is garbage, never data.
                    System.err.println("lakekv: could not delete unreferenced file " + path + ": " + e);
                }
            }
        }
    }

    /** One task: a file per run of equal partition values (the rows arrive sorted by them). */
    private static final class Writer implements DataWriter<InternalRow> {
        private final Factory factory;
        private final TaskAttemptContextImpl context;
        private final List<WrittenFile> written = new ArrayList<>();
        /** Every path this task created or began to create, finished or not: what its abort deletes. */
        private final List<String> created = new ArrayList<>();
        private OutputWriter current;
        private String currentPath;
        private Object[] currentKey;

        Writer(Factory factory, TaskAttemptContextImpl context) {
            this.factory = factory;
            this.context = context;
        }

        @Override
        public void write(InternalRow row) throws IOException {
            Object[] key = new Object[factory.partitionOrdinals().length];
            for (int i = 0; i < key.length; i++) {
                int ordinal = factory.partitionOrdinals()[i];
                key[i] = row.isNullAt(ordinal) ? null : InternalRow.copyValue(row.get(ordinal, factory.partitionTypes()[i]));
            }
            if (current == null || !Arrays.equals(key, currentKey, (a, b) -> Objects.equals(a, b) ? 0 : 1)) {
                finishFile();
                currentPath = factory.newFilePath();
                // Recorded before the file exists: opening it may fail (or be interrupted) after
                // creating it, and abort() must then delete it too.
                created.add(currentPath);
                current = factory.files().newInstance(factory.absolute(currentPath).toString(), factory.schema(), context);
                currentKey = key;
            }
            current.write(row);
        }

        private void finishFile() throws IOException {
            if (current == null) {
                return;
            }
            current.close();
            current = null;
            written.add(new WrittenFile(currentPath, checksum(factory.absolute(currentPath))));
        }

        /** CRC32C of the whole file as written, read back once (the catalog checks it on every read). */
        private long checksum(Path path) throws IOException {
            CRC32C crc = new CRC32C();
            FileSystem fs = path.getFileSystem(context.getConfiguration());
            byte[] buffer = new byte[1 << 20];
            try (FSDataInputStream in = fs.open(path)) {
                for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
                    crc.update(buffer, 0, n);
                }
            }
            return crc.getValue();
        }

        @Override
        public WriterCommitMessage commit() throws IOException {
            finishFile();
            return new Written(List.copyOf(written));
        }

        @Override
        public void abort() {
            if (current != null) {
                OutputWriter open = current;
                current = null;
                try {
                    open.close();
                } catch (Exception e) {  // Scala code throws IOException undeclared: the file goes anyway
                    System.err.println("lakekv: closing an aborted file (it is deleted next): " + e);
                }
            }
            List<WrittenFile> mine = new ArrayList<>();
            created.forEach(path -> mine.add(new WrittenFile(path, 0)));
            factory.delete(mine);
        }

        @Override
        public void close() {
            // commit() or abort() has already finished every file.
        }
    }
}
