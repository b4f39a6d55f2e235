package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.procedures.BoundProcedure;
import org.apache.spark.sql.connector.catalog.procedures.ProcedureParameter;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;

/**
 * {@code CALL <catalog>.system.table_changes(table, start_version, end_version => NULL,
 * identifier_columns => NULL)}: a table's changelog over versions ({@code start_version},
 * {@code end_version}], as rows (catalog/changes.py computes it: the table's columns, then
 * {@code _change_type}, {@code _commit_version}, {@code _commit_timestamp}).
 *
 * <p>Spark's connector API has no table-valued functions for a catalog, and a procedure's
 * result is a local relation: the changelog is computed by the control plane, sent as JSON
 * lines and parsed by Spark's JSON reader against the changelog's schema, on the driver.
 * {@code spark.sql("CALL ...")} is a DataFrame like any other (filter it, write it, or
 * {@code createOrReplaceTempView} it, as Iceberg's {@code create_changelog_view} does).
 */
final class ChangesProcedure implements UnboundProcedure, BoundProcedure {
    static final String NAME = "table_changes";

    private final LakehouseCatalog catalog;

    private ChangesProcedure(LakehouseCatalog catalog) {
        this.catalog = catalog;
    }

    /** The procedure {@code ident} names, or null if it is not this one. */
    static UnboundProcedure load(LakehouseCatalog catalog, Identifier ident) {
        if (Arrays.equals(ident.namespace(), new String[] {TransactionProcedures.NAMESPACE}) && ident.name().equals(NAME)) {
            return new ChangesProcedure(catalog);
        }
        return null;
    }

    static Identifier[] list(String[] namespace) {
        return Arrays.equals(namespace, new String[] {TransactionProcedures.NAMESPACE})
                ? new Identifier[] {Identifier.of(namespace, NAME)} : new Identifier[0];
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String description() {
        return "a table's changelog between two lakehouse versions: inserts, deletes and update pre/post images";
    }

    @Override
    public BoundProcedure bind(StructType inputType) {
        return this;
    }

    @Override
    public boolean isDeterministic() {
        return false;  // end_version NULL reads the latest version
    }

    @Override
    public ProcedureParameter[] parameters() {
        return new ProcedureParameter[] {
            ProcedureParameter.in("table", DataTypes.StringType).build(),
            ProcedureParameter.in("start_version", DataTypes.LongType).build(),
            ProcedureParameter.in("end_version", DataTypes.LongType).defaultValue("NULL").build(),
            ProcedureParameter.in("identifier_columns", DataTypes.createArrayType(DataTypes.StringType))
                    .defaultValue("NULL").build(),
        };
    }

    @Override
    public Iterator<Scan> call(InternalRow input) {
        if (input.isNullAt(0) || input.isNullAt(1)) {
            throw new LakehouseException.InvalidArgument("invalid_argument",
                    NAME + ": table and start_version are required");
        }
        ObjectNode args = ControlPlane.args();
        List<String> parts = new ArrayList<>(Arrays.asList(input.getUTF8String(0).toString().trim().split("\\.")));
        if (parts.size() > 2 && parts.get(0).equals(catalog.name())) {
            parts.remove(0);  // 'lake.ns.t' as well as 'ns.t'
        }
        args.put("table", String.join(".", parts));
        args.put("start", input.getLong(1));
        if (!input.isNullAt(2)) {
            args.put("end", input.getLong(2));
        }
        if (!input.isNullAt(3)) {
            ArrayData columns = input.getArray(3);
            ArrayNode ids = args.putArray("identifier_columns");
            for (int i = 0; i < columns.numElements(); i++) {
                ids.add(columns.getUTF8String(i).toString());
            }
        }
        JsonNode answer = catalog.control().call(NAME, args);
        StructType schema = (StructType) DataType.fromJson(answer.get("schema").toString());
        List<String> lines = new ArrayList<>();
        answer.get("rows").forEach(row -> lines.add(row.asText()));
        SparkSession session = SparkSession.active();
        Dataset<org.apache.spark.sql.Row> parsed = (Dataset<org.apache.spark.sql.Row>) session.read()
                .schema(schema).option("mode", "FAILFAST").json(session.createDataset(lines, Encoders.STRING()));
        InternalRow[] rows = parsed.queryExecution().executedPlan().executeCollect();
        StructType parsedSchema = parsed.schema();
        LocalScan scan = new LocalScan() {
            @Override
            public InternalRow[] rows() {
                return rows;
            }

            @Override
            public StructType readSchema() {
                return parsedSchema;
            }
        };
        return List.<Scan>of(scan).iterator();
    }
}
