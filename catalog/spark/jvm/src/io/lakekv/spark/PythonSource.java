package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.spark.api.python.PythonUtils$;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsDynamicOverwrite;
import org.apache.spark.sql.connector.write.SupportsOverwrite;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.DataSourceManager;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code lakehouse} Python data source, driven by the catalog: it moves
 * the bytes of writes (every storage) and of reads the JVM cannot open itself
 * ({@code s3://} through s3fs).
 *
 * <p>The catalog registers the source in the session itself (the pickled
 * class comes from the control plane), so {@code bin/spark-sql} needs no
 * Python registration step. Each use builds a new {@link PythonDataSourceV2}
 * with the table's schema: no {@code inferSchema} round trip, and no read
 * plan shared between queries, which is why the source registered here
 * ({@code catalog.spark.source.CatalogScanSource}) prunes files by the
 * scan's filters while the public {@code lakehouse} source cannot.
 */
final class PythonSource {
    private final LakehouseCatalog catalog;
    private final String url;
    private final Map<String, String> storageOptions;
    private String shortName;

    PythonSource(LakehouseCatalog catalog, String url, Map<String, String> storageOptions) {
        this.catalog = catalog;
        this.url = url;
        this.storageOptions = storageOptions;
    }

    /** Registers the source in the active session on first use; returns its short name. */
    private synchronized String register() {
        SparkSession session = SparkSession.active();
        DataSourceManager manager = session.sessionState().dataSourceManager();
        if (shortName == null) {
            JsonNode source = catalog.control().call("data_source", ControlPlane.args());
            shortName = source.get("name").asText();
            byte[] pickled = Base64.getDecoder().decode(source.get("pickle").asText());
            if (!manager.dataSourceExists(shortName)) {
                manager.registerDataSource(
                        shortName, new UserDefinedPythonDataSource(PythonUtils$.MODULE$.createPythonFunction(pickled)));
            }
        }
        return shortName;
    }

    /** The source's options for one table: where it is, which table, storage options, staging transaction. */
    private Map<String, String> options(LakehouseTable table) {
        Map<String, String> options = new HashMap<>();
        options.put("lakehouse", url);
        options.put("table", String.join(".", table.nameParts));
        storageOptions.forEach((k, v) -> options.put("storage." + k, v));
        if (table.txn != null) {
            options.put("transaction", table.txn);
        }
        return options;
    }

    CaseInsensitiveStringMap readOptions(LakehouseTable table) {
        Map<String, String> options = options(table);
        options.put("versionAsOf", Long.toString(table.version));
        return new CaseInsensitiveStringMap(options);
    }

    Table table(LakehouseTable table, Map<String, String> extra) {  // extra: e.g. the read options
        PythonDataSourceV2 provider = new PythonDataSourceV2();
        provider.setShortName(register());
        Map<String, String> options = options(table);
        options.putAll(extra);
        return provider.getTable(table.schema, new Transform[0], options);
    }

    WriteBuilder newWriteBuilder(LakehouseTable table, LogicalWriteInfo info) {
        return new TableWriteBuilder(table, info);
    }

    /**
     * Builds the Python source's write once Spark has said what it replaces.
     *
     * <p>Every overwrite carries the version the statement loaded the table at
     * as the source's {@code readVersion}: a commit since then that may hold
     * replaced rows (say, another process's append) makes it a
     * {@code RetryableConflictError} instead of being silently replaced. A
     * staged table (CTAS, REPLACE) lives in its own transaction and needs no
     * such check. What is replaced:
     * <ul>
     * <li>{@code truncate()} ({@code INSERT OVERWRITE}, static mode): every row;
     * <li>{@code overwrite(filters)} ({@code INSERT OVERWRITE ... PARTITION (c = v)},
     *     {@code writeTo(...).overwrite(condition)}): the rows matching the
     *     condition, which must have an exact form (as for DELETE);
     * <li>{@code overwriteDynamicPartitions()} ({@code overwritePartitions()},
     *     dynamic mode): the partitions the written rows fall in.
     * </ul>
     */
    private final class TableWriteBuilder implements SupportsOverwrite, SupportsDynamicOverwrite {
        private final LakehouseTable table;
        private final LogicalWriteInfo info;
        private boolean overwrite;
        private ArrayNode condition;
        private boolean dynamic;

        TableWriteBuilder(LakehouseTable table, LogicalWriteInfo info) {
            this.table = table;
            this.info = info;
        }

        @Override
        public WriteBuilder truncate() {
            overwrite = true;
            return this;
        }

        @Override
        public boolean canOverwrite(Filter[] filters) {
            return Filters.encodeConditions(filters) != null;
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
            Map<String, String> options = options(table);
            if (overwrite && table.txn == null) {
                options.put("readVersion", Long.toString(table.version));
            }
            if (condition != null) {
                options.put("overwriteCondition", condition.toString());
            }
            if (dynamic) {
                options.put("dynamicOverwrite", "true");
            }
            WriteBuilder python = ((org.apache.spark.sql.connector.catalog.SupportsWrite) table(table, Map.of()))
                    .newWriteBuilder(new WriteInfo(info, new CaseInsensitiveStringMap(options)));
            if (overwrite) {
                python = ((SupportsTruncate) python).truncate();
            }
            return python.build();
        }
    }

    /** Spark's write info with the table's options in place of the (empty) statement options. */
    private record WriteInfo(LogicalWriteInfo info, CaseInsensitiveStringMap options) implements LogicalWriteInfo {
        @Override
        public String queryId() {
            return info.queryId();
        }

        @Override
        public StructType schema() {
            return info.schema();
        }

        @Override
        public Optional<StructType> rowIdSchema() {
            return info.rowIdSchema();
        }

        @Override
        public Optional<StructType> metadataSchema() {
            return info.metadataSchema();
        }
    }
}
