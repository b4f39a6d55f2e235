package io.lakekv.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwrite;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.sources.Filter;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds an INSERT, append or overwrite once Spark has said what it replaces.
 *
 * <p>Where the JVM can write the table's storage ({@code file:}), Spark's own
 * Parquet writer writes the rows ({@link NativeWrite}); elsewhere the Python
 * source does. Either way the job commits once, and every overwrite carries
 * the version the statement loaded the table at: a commit since then that
 * may hold replaced rows (say, another process's append) makes it a
 * {@code RetryableConflictError} instead of being silently replaced. A staged
 * table (CTAS, REPLACE) lives in its own transaction and needs no such check.
 * A query that read lakehouse tables commits with those reads checked
 * ({@link QueryReads}), staged ones at their transaction's commit. What is replaced:
 * <ul>
 * <li>{@code truncate()} ({@code INSERT OVERWRITE}, static mode): every row;
 * <li>{@code overwrite(filters)} ({@code INSERT OVERWRITE ... PARTITION (c = v)},
 *     {@code writeTo(...).overwrite(condition)}): the rows matching the
 *     condition, which must have an exact form (as for DELETE);
 * <li>{@code overwriteDynamicPartitions()} ({@code overwritePartitions()},
 *     dynamic mode): the partitions the written rows fall in.
 * </ul>
 */
final class TableWriteBuilder implements SupportsOverwrite, SupportsDynamicOverwrite {
    private final LakehouseTable table;
    private final LogicalWriteInfo info;
    /** What the query writing this read (null outside Spark's catalog transaction). */
    private final QueryReads reads;
    private boolean overwrite;
    private ArrayNode condition;
    private boolean dynamic;

    TableWriteBuilder(LakehouseTable table, LogicalWriteInfo info) {
        this.table = table;
        this.info = info;
        this.reads = QueryReads.active(table.catalog);
    }

    @Override
    public WriteBuilder truncate() {
        overwrite = true;
        return this;
    }

    // Spark's V2 predicates are converted here, not by SupportsOverwrite's
    // defaults, whose conversion can drop half of an OR (Filters.exactV1).
    @Override
    public boolean canOverwrite(Predicate[] predicates) {
        Filter[] filters = Filters.exactV1(predicates);
        return filters != null && canOverwrite(filters);
    }

    @Override
    public WriteBuilder overwrite(Predicate[] predicates) {
        Filter[] filters = Filters.exactV1(predicates);
        if (filters == null) {
            throw new LakehouseException.InvalidArgument("invalid_argument", "overwrite of " + table.name()
                    + ": the condition has no exact form for the lakehouse catalog; nothing was written");
        }
        return overwrite(filters);
    }

    @Override
    public boolean canOverwrite(Filter[] filters) {
        return table.hasExactForm(filters);
    }

    @Override
    public WriteBuilder overwrite(Filter[] filters) {
        condition = Filters.encodeConditions(filters);
        if (condition == null) {
            throw new LakehouseException.InvalidArgument("invalid_argument", "overwrite of " + table.name()
                    + ": the condition has no exact form for the lakehouse catalog; nothing was written");
        }
        overwrite = true;
        return this;
    }

    @Override
    public WriteBuilder overwriteDynamicPartitions() {
        overwrite = true;
        dynamic = true;
        return this;
    }

    @Override
    public Write build() {
        if (table.dataRoot != null && table.dataPath != null) {
            return new NativeWrite(table, info, this::commitRequest);
        }
        if (Options.hasStreamingOption(info.options())) {
            throw Options.streamingOptionOnBatch(table.name());  // the Python source takes no stream
        }
        WriteOrder.refuseUnhonoured(table);  // the Python source writes in the rows' own order
        Map<String, String> options = new HashMap<>();
        if (overwrite && table.txn == null) {
            options.put("readVersion", Long.toString(table.version));
        }
        if (condition != null) {
            options.put("overwriteCondition", condition.toString());
        }
        if (dynamic) {
            options.put("dynamicOverwrite", "true");
        }
        if (reads != null) {
            options.put("readSet", reads.json().toString());  // the query's scans are planned before its write
        }
        return table.catalog.pythonSource().write(table, info, options, overwrite);
    }

    /** The control-plane arguments of a native write's commit (see {@code ControlPlane.op_commit_written}). */
    private ObjectNode commitRequest(List<NativeWrite.WrittenFile> written) {
        ObjectNode args = table.requestArgs();
        ArrayNode files = args.putArray("files");
        written.forEach(f -> files.addObject().put("path", f.path()).put("crc32c", f.crc32c()));
        if (reads != null) {
            args.set("reads", reads.json());
        }
        if (overwrite) {
            ObjectNode replaced = args.putObject("overwrite");
            if (table.txn == null) {
                replaced.put("read_version", table.version);
            }
            if (condition != null) {
                replaced.set("condition", condition);
            }
            replaced.put("dynamic", dynamic);
        }
        return args;
    }
}
