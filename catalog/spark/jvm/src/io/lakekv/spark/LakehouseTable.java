package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.catalog.StagedTable;
import org.apache.spark.sql.connector.catalog.SupportsDelete;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsRowLevelOperations;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.RowLevelOperationBuilder;
import org.apache.spark.sql.connector.write.RowLevelOperationInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One table as loaded at one lakehouse version.
 *
 * <p>A query's scans read the version its load saw (so a DataFrame keeps the
 * version it was analysed at, as Iceberg's do); every new query loads the
 * table again and sees the latest commit. Reads go through Spark's own Parquet
 * reader when the JVM can open the storage ({@code data_root}), through the
 * Python source otherwise; writes likewise ({@link TableWriteBuilder}).
 *
 * <p>{@code DELETE FROM t WHERE ...} is one catalog commit made by the
 * control plane (copy-on-write: files the condition covers by their
 * statistics go without being read, the others are rewritten without the
 * matching rows). Only conditions with an exact translation take that path
 * ({@code catalog/spark/conditions.py}); for any other, and for
 * {@code UPDATE} and {@code MERGE}, Spark rewrites the files itself
 * ({@link RowLevelRewrite}).
 */
class LakehouseTable implements SupportsRead, SupportsWrite, SupportsDelete, SupportsRowLevelOperations, ReadOnlyPartitions {
    private static final Set<TableCapability> CAPABILITIES =
            EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.TRUNCATE,
                    TableCapability.OVERWRITE_BY_FILTER, TableCapability.OVERWRITE_DYNAMIC);
    /** Streaming writes go through Spark's Parquet writer only ({@link NativeWrite}): storage it writes. */
    private static final Set<TableCapability> WITH_STREAMING_WRITE =
            EnumSet.of(TableCapability.STREAMING_WRITE, TableCapability.MICRO_BATCH_READ, TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
                    TableCapability.TRUNCATE, TableCapability.OVERWRITE_BY_FILTER, TableCapability.OVERWRITE_DYNAMIC);

    final LakehouseCatalog catalog;
    final List<String> nameParts;
    final String id;
    final long version;
    final StructType schema;
    final String[] partitionColumns;
    final Map<String, String> properties;
    final String dataRoot;
    /** Store-relative directory of the table's data files (where Spark's writer puts new ones). */
    final String dataPath;
    /**
     * The durable transaction the table was loaded in, or null: a staged table's
     * (CREATE TABLE AS SELECT) or the session's ({@code spark.sql.catalog.<name>.transaction}).
     * Its reads see what the transaction staged, its writes stage into it, and
     * its {@link #version} is -1 (a transaction's view is no lakehouse version).
     */
    final String txn;
    /** Loaded with VERSION / TIMESTAMP AS OF: an immutable version, whose reads never conflict. */
    final boolean timeTravel;
    /** {@link System#nanoTime()} when the control plane answered the load: how fresh {@link #version} is. */
    final long loadedAtNanos = System.nanoTime();

    LakehouseTable(LakehouseCatalog catalog, JsonNode info, String txn) {
        this(catalog, info, txn, false);
    }

    LakehouseTable(LakehouseCatalog catalog, JsonNode info, String txn, boolean timeTravel) {
        this.catalog = catalog;
        this.nameParts = ControlPlane.JSON.convertValue(info.get("name"),
                ControlPlane.JSON.getTypeFactory().constructCollectionType(List.class, String.class));
        this.id = info.get("id").asText();
        this.version = info.get("version").asLong();
        this.schema = (StructType) DataType.fromJson(info.get("schema").toString());
        this.partitionColumns = ControlPlane.JSON.convertValue(info.get("partitioning"), String[].class);
        Map<String, String> props = new LinkedHashMap<>();
        info.get("properties").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        this.properties = props;
        JsonNode root = info.get("data_root");
        this.dataRoot = root == null || root.isNull() ? null : catalog.dataRoot(root);
        JsonNode path = info.get("data_path");
        this.dataPath = path == null || path.isNull() ? null : path.asText();
        this.txn = txn;
        this.timeTravel = timeTravel;
    }

    @Override
    public String name() {
        return catalog.name() + "." + String.join(".", nameParts);
    }

    @Override
    public StructType schema() {
        // CHAR(n)/VARCHAR(n) columns as Spark's own types (stored as strings, see ColumnTypes),
        // so that Spark applies its length rules; the scan and writes use the string schema.
        return ColumnTypes.forSpark(schema);
    }

    @Override
    public Transform[] partitioning() {
        Transform[] transforms = new Transform[partitionColumns.length];
        for (int i = 0; i < partitionColumns.length; i++) {
            transforms[i] = Expressions.identity(partitionColumns[i]);
        }
        return transforms;
    }

    @Override
    public Map<String, String> properties() {
        return properties;
    }

    @Override
    public Set<TableCapability> capabilities() {
        return dataRoot != null && dataPath != null ? WITH_STREAMING_WRITE : CAPABILITIES;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        IncrementalRead read = IncrementalRead.parse(this, options);  // refuses any other option
        if (!options.isEmpty() && dataRoot == null) {
            throw IncrementalRead.invalid("table " + name() + " is read through the Python source, which reads no versions"
                    + " incrementally (a column type Spark's reader cannot read, or storage the JVM cannot open)");
        }
        if (dataRoot == null) {
            QueryReads.record(this, ControlPlane.JSON.createArrayNode());  // every row of this version: no filter known here
            CaseInsensitiveStringMap pythonOptions = catalog.pythonSource().readOptions(this);
            return ((SupportsRead) catalog.pythonSource().table(this, pythonOptions)).newScanBuilder(pythonOptions);
        }
        return new LakehouseScanBuilder(this, null, options.isEmpty() ? null : read, null);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        Options.refuseAll(info.options(), "write");
        return new TableWriteBuilder(this, info);
    }

    /** A control-plane request about this table: its name and id (a replaced table is refused), and its transaction. */
    ObjectNode requestArgs() {
        ObjectNode args = ControlPlane.args();
        ArrayNode parts = args.putArray("name");
        nameParts.forEach(parts::add);
        args.put("id", id);
        if (txn != null) {
            args.put("txn", txn);
        }
        return args;
    }

    /** {@link #requestArgs} pinned to the version the table was loaded at (none inside a transaction). */
    ObjectNode versionArgs() {
        ObjectNode args = requestArgs();
        if (txn == null) {
            args.put("version", version);
        }
        return args;
    }

    // Spark's V2 predicates are converted here, not by SupportsDelete's defaults,
    // whose conversion can drop half of an OR (Filters.exactV1).
    @Override
    public boolean canDeleteWhere(Predicate[] predicates) {
        Filter[] filters = Filters.exactV1(predicates);
        return filters != null && canDeleteWhere(filters);
    }

    @Override
    public void deleteWhere(Predicate[] predicates) {
        Filter[] filters = Filters.exactV1(predicates);
        if (filters == null) {
            throw new LakehouseException.InvalidArgument("invalid_argument",
                    "DELETE FROM " + name() + ": the condition has no exact form for the lakehouse catalog; nothing was deleted");
        }
        deleteWhere(filters);
    }

    @Override
    public boolean canDeleteWhere(Filter[] filters) {
        return hasExactForm(filters);
    }

    /** Whether the control plane translates this condition exactly (see catalog/spark/conditions.py). */
    boolean hasExactForm(Filter[] filters) {
        ArrayNode conditions = Filters.encodeConditions(filters);
        if (conditions == null) {
            return false;
        }
        ObjectNode args = versionArgs();
        args.set("filters", conditions);
        return catalog.control().call("can_delete_where", args).asBoolean(false);
    }

    @Override
    public void deleteWhere(Filter[] filters) {
        ArrayNode conditions = Filters.encodeConditions(filters);
        if (conditions == null) {
            throw new LakehouseException.InvalidArgument("invalid_argument",
                    "DELETE FROM " + name() + ": the condition has no exact form for the lakehouse catalog; nothing was deleted");
        }
        ObjectNode args = requestArgs();
        args.set("filters", conditions);
        catalog.control().call("delete_where", args);
    }

    /**
     * {@code UPDATE} and {@code MERGE INTO} (and a {@code DELETE} Spark cannot
     * hand to {@link #deleteWhere}): copy-on-write through Spark's Parquet writer.
     * Refused at the write (not here, where Spark asks for every DELETE) on
     * storage that writer cannot reach.
     */
    @Override
    public RowLevelOperationBuilder newRowLevelOperationBuilder(RowLevelOperationInfo info) {
        Options.refuseAll(info.options(), "write");
        return () -> new RowLevelRewrite(this, info.command());
    }

    /** A table created inside a durable transaction: visible to others only when the statement commits. */
    static final class Staged extends LakehouseTable implements StagedTable {
        Staged(LakehouseCatalog catalog, JsonNode info, String txn) {
            super(catalog, info, txn);
        }

        @Override
        public CustomTaskMetric[] reportDriverMetrics() {  // both StagedTable and SupportsDelete default it
            return StagedTable.super.reportDriverMetrics();
        }

        @Override
        public void commitStagedChanges() {
            catalog.commitTransaction(txn);
        }

        @Override
        public void abortStagedChanges() {
            catalog.abortTransaction(txn);
        }
    }
}
