package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.util.TreeSet;

/**
 * {@code spark.readStream.table("lake.ns.t")}: a stream of the rows appended to a table,
 * whose offsets are lakehouse versions.
 *
 * <p>A micro-batch covers the versions ({@code start}, {@code end}] of its offsets: the rows
 * the commits that touched the table in that range appended (the control plane's
 * {@code plan_appended}, the same as a batch read with {@code start-version} and
 * {@code end-version}). By default each micro-batch holds one such version
 * ({@code streaming-max-versions-per-micro-batch}). Spark logs a batch's offsets in the
 * checkpoint before it runs it, and a version never changes, so a batch run again after a
 * restart reads exactly the same rows: with an exactly-once sink (a lakehouse table,
 * Spark's file sink), every appended row arrives once.
 *
 * <p>Without {@code start-version}, the first micro-batch is the whole table at the version
 * the stream first looked (offset -1 to that version), as Delta's stream does; with it, the
 * stream starts after that version. A version that deleted or changed rows fails the stream
 * with an error naming it, unless {@code streaming-skip-delete-versions} /
 * {@code streaming-skip-overwrite-versions} skip it (its rows too); a compaction adds nothing.
 * A version the stream still needs that is past the lakehouse's retention fails it with
 * {@code SnapshotTooOldError}, naming that version and the retention floor: start a new
 * checkpoint from a retained {@code start-version}.
 */
final class VersionStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    /** The offset before the first batch of a stream that starts with the whole table. */
    private static final long WHOLE_TABLE = -1;

    private final LakehouseTable table;
    private final IncrementalRead read;
    private final long initial;
    private final int maxVersions;
    private final PartitionReaderFactory factory = new Reading();
    /** Versions that touched the table after the last offset Spark asked from, up to {@link #scannedThrough}. */
    private final TreeSet<Long> touching = new TreeSet<>();
    private long scannedThrough = Long.MIN_VALUE;
    /** With Trigger.AvailableNow: the latest version when the trigger began, beyond which no batch reads. */
    private long availableNow = Long.MAX_VALUE;

    VersionStream(LakehouseTable table, IncrementalRead read) {
        this.table = table;
        this.read = read;
        this.initial = read.start != null ? read.start : WHOLE_TABLE;
        this.maxVersions = read.maxVersions != null ? read.maxVersions : 1;
    }

    @Override
    public Offset initialOffset() {
        return new VersionOffset(initial);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return VersionOffset.parse(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return ReadLimit.maxFiles(maxVersions);  // counted in versions, not files
    }

    @Override
    public Offset latestOffset() {
        return latestOffset(new VersionOffset(initial), ReadLimit.allAvailable());
    }

    @Override
    public synchronized void prepareForTriggerAvailableNow() {
        availableNow = latest();
    }

    @Override
    public synchronized Offset latestOffset(Offset startOffset, ReadLimit limit) {
        long start = ((VersionOffset) startOffset).version;
        if (start == WHOLE_TABLE) {
            // The first batch: the whole table at the latest version (or at the AvailableNow cap).
            return new VersionOffset(Math.min(latest(), availableNow));
        }
        long after = Math.max(start, scannedThrough);
        ObjectNode args = table.requestArgs();
        args.remove("txn");
        args.put("after", after);
        JsonNode answer = table.catalog.control().call("table_versions", args);
        answer.path("versions").forEach(v -> touching.add(v.asLong()));
        scannedThrough = Math.max(scannedThrough, answer.path("latest").asLong());
        touching.headSet(start, true).clear();
        int most = limit instanceof ReadMaxFiles max ? max.maxFiles()
                : limit instanceof ReadAllAvailable ? Integer.MAX_VALUE : maxVersions;
        long end = start;
        int taken = 0;
        for (long version : touching) {
            if (version > availableNow || taken == most) {
                break;
            }
            end = version;
            taken++;
        }
        return new VersionOffset(end);
    }

    private long latest() {
        ObjectNode args = table.requestArgs();
        args.remove("txn");
        args.put("after", Long.MAX_VALUE);
        return table.catalog.control().call("table_versions", args).path("latest").asLong();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        long from = ((VersionOffset) start).version;
        long through = ((VersionOffset) end).version;
        JsonNode plan = read.plan(table, from, through);
        if (plan.path("files").isEmpty()) {
            return new InputPartition[0];
        }
        LakehouseScanBuilder builder = new LakehouseScanBuilder(table, null, read, plan);
        builder.pruneColumns(table.schema);
        Batch batch = builder.build().toBatch();
        PartitionReaderFactory reader = batch.createReaderFactory();
        InputPartition[] splits = batch.planInputPartitions();
        InputPartition[] out = new InputPartition[splits.length];
        for (int i = 0; i < splits.length; i++) {
            out[i] = new Split(splits[i], reader);
        }
        return out;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return factory;
    }

    @Override
    public void commit(Offset end) {
        // Nothing to release: versions are immutable, and retention is the lakehouse's.
    }

    @Override
    public void stop() {
    }

    @Override
    public String toString() {
        return "VersionStream[" + table.name() + "]";
    }

    /** A lakehouse version as a stream offset: {@code {"version": n}}. */
    static final class VersionOffset extends Offset {
        final long version;

        VersionOffset(long version) {
            this.version = version;
        }

        static VersionOffset parse(String json) {
            try {
                JsonNode node = ControlPlane.JSON.readTree(json);
                if (node == null || !node.path("version").canConvertToLong()) {
                    throw new IllegalArgumentException("no version");
                }
                return new VersionOffset(node.path("version").asLong());
            } catch (IOException | IllegalArgumentException e) {
                throw new LakehouseException.InvalidArgument("invalid_argument", "the checkpoint's offset " + json
                        + " is not a lakehouse stream offset ({\"version\": n}): was it written by another source?");
            }
        }

        @Override
        public String json() {
            return "{\"version\":" + version + "}";
        }
    }

    /** A split of one micro-batch's Parquet scan, with that scan's reader factory. */
    record Split(InputPartition split, PartitionReaderFactory reader) implements InputPartition {
        @Override
        public String[] preferredLocations() {
            return split.preferredLocations();
        }
    }

    /** The stream's one reader factory: each split is read by the factory of its own micro-batch's scan. */
    static final class Reading implements PartitionReaderFactory {
        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            Split split = (Split) partition;
            return split.reader().createReader(split.split());
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            Split split = (Split) partition;
            return split.reader().createColumnarReader(split.split());
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            Split split = (Split) partition;
            return split.reader().supportColumnarReads(split.split());
        }
    }

    /**
     * The scan of a table that Spark built without pruning its columns: a stream's
     * ({@link LakehouseScanBuilder#build}). As a batch it reads the table as a plain scan would.
     */
    static final class StreamScan implements Scan {
        private final LakehouseTable table;
        private final IncrementalRead read;

        StreamScan(LakehouseTable table, IncrementalRead read) {
            this.table = table;
            this.read = read;
        }

        @Override
        public StructType readSchema() {
            return table.schema;
        }

        @Override
        public String description() {
            return "lakehouse stream of " + table.name();
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            if (table.txn != null || table.timeTravel) {
                throw IncrementalRead.invalid("a stream reads lakehouse versions as they are committed: not inside a"
                        + " durable transaction nor with VERSION/TIMESTAMP AS OF");
            }
            IncrementalRead settings = read != null ? read : IncrementalRead.parse(table,
                    new org.apache.spark.sql.util.CaseInsensitiveStringMap(java.util.Map.of()));
            settings.checkStream();
            return new VersionStream(table, settings);
        }

        @Override
        public Batch toBatch() {
            LakehouseScanBuilder builder = new LakehouseScanBuilder(table, null, read, null);
            builder.pruneColumns(table.schema);
            return builder.build().toBatch();  // not called by the streaming engine: a batch scan
        }
    }
}
