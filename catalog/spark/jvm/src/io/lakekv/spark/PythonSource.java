package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.api.python.PythonUtils$;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.DataSourceManager;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
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
        if (table.txn == null) {  // inside a transaction the source reads the transaction's view
            options.put("versionAsOf", Long.toString(table.version));
        }
        return new CaseInsensitiveStringMap(options);
    }

    Table table(LakehouseTable table, Map<String, String> extra) {  // extra: e.g. the read options
        PythonDataSourceV2 provider = new PythonDataSourceV2();
        provider.setShortName(register());
        Map<String, String> options = options(table);
        options.putAll(extra);
        return provider.getTable(table.schema, new Transform[0], options);
    }

    /**
     * The Python source's write into {@code table}: {@code writeOptions} say
     * what an overwrite replaces (see {@link TableWriteBuilder}).
     */
    Write write(LakehouseTable table, LogicalWriteInfo info, Map<String, String> writeOptions, boolean overwrite) {
        Map<String, String> options = options(table);
        options.putAll(writeOptions);
        WriteBuilder python = ((org.apache.spark.sql.connector.catalog.SupportsWrite) table(table, Map.of()))
                .newWriteBuilder(new WriteInfo(info, new CaseInsensitiveStringMap(options)));
        if (overwrite) {
            python = ((SupportsTruncate) python).truncate();
        }
        return python.build();
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
