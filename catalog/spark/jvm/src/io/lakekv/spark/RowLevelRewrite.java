package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.RowLevelOperation;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.List;

/**
 * A copy-on-write {@code UPDATE} or {@code MERGE} (and a {@code DELETE}
 * whose condition has no exact form for {@link LakehouseTable#deleteWhere}).
 *
 * <p>Spark reads the files this operation's scan plans, computes every row
 * they hold after the change (changed or not) plus any inserted rows, and
 * writes them through a {@link NativeWrite}; the commit removes exactly the
 * scanned files and adds the written ones, as one catalog commit at which
 * the control plane checks what was committed since the scan's version (see
 * {@code ControlPlane.op_commit_written}).
 *
 * <p>The scan is the table's usual one except that it pushes no filter into
 * Parquet: row groups a filter would skip hold rows the rewrite must keep.
 */
final class RowLevelRewrite implements RowLevelOperation {
    private final LakehouseTable table;
    private final Command command;
    /** What the statement read (the target's scan, a MERGE source in this catalog), or null. */
    private final QueryReads reads;
    /** What the scan read: set when Spark builds it, before it builds the write. */
    private JsonNode plan;
    private ArrayNode planFilters;

    RowLevelRewrite(LakehouseTable table, Command command) {
        this.table = table;
        this.command = command;
        this.reads = QueryReads.active(table.catalog);
    }

    @Override
    public Command command() {
        return command;
    }

    @Override
    public String description() {
        return "lakehouse copy-on-write " + command.name().toLowerCase() + " of " + table.name();
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        Options.refuseAll(options, "read");
        // Spark plans the scan before it asks for the write: storage Spark's writer cannot
        // write (and its reader then cannot read) is refused here, before any file is planned.
        NativeWrite.checkWritable(table, command.name());
        return new LakehouseScanBuilder(table, this);
    }

    /** Called by the scan this operation made: the files it reads, and the filters that chose them. */
    synchronized void scanned(JsonNode plan, ArrayNode filters) {
        if (!plan.path("parquet_field_ids").asBoolean(false)) {
            throw new LakehouseException.InvalidArgument("invalid_argument", command.name() + " " + table.name()
                    + ": some data files were written before Parquet field ids were recorded; compact the table"
                    + " (lake.compact_table) first. Nothing was changed");
        }
        this.plan = plan;
        this.planFilters = filters;
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        Options.refuseAll(info.options(), "write");
        NativeWrite.checkWritable(table, command.name());
        return new WriteBuilder() {
            @Override
            public Write build() {
                return new NativeWrite(table, info, RowLevelRewrite.this::commitRequest);
            }
        };
    }

    /** The control-plane arguments of the commit: the table, and what the rewrite replaces. */
    private synchronized ObjectNode commitRequest(List<NativeWrite.WrittenFile> written) {
        ObjectNode args = table.requestArgs();
        ArrayNode files = args.putArray("files");
        written.forEach(f -> files.addObject().put("path", f.path()).put("crc32c", f.crc32c()));
        if (reads != null) {
            args.set("reads", reads.json());
        }
        ObjectNode replace = args.putObject("replace");
        replace.put("version", table.version);
        ArrayNode removed = replace.putArray("removed");
        if (plan == null) {
            // Spark planned no scan (the target's rows were optimised away, e.g.
            // WHERE false): nothing was read, so nothing is replaced.
            replace.put("read", false);
        } else {
            plan.get("files").forEach(f -> removed.add(f.get("path").asText()));
            replace.set("filters", planFilters);
        }
        return args;
    }
}
