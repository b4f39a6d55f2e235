package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

import java.util.Base64;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;

/**
 * The metadata tables: {@code lake.ns.t.history}, {@code .snapshots}, {@code .files},
 * {@code .partitions} and the whole lakehouse's {@code lake.system.history}, with
 * {@code VERSION AS OF} / {@code TIMESTAMP AS OF}.
 *
 * <p>A name is a metadata table only when it names no table or view: a real table
 * called {@code history} (in a namespace {@code ns.t}, or a user namespace {@code system})
 * is that table. The rows come from the control plane's {@code metadata_table} op
 * ({@code catalog/spark/control_metadata.py}) when the table is loaded, so one query
 * reads one answer, and are handed to Spark as a {@link LocalScan}.
 */
final class MetadataTables {
    /** The metadata tables of a table, by the last part of the name. */
    private static final Set<String> TABLE_KINDS = Set.of("history", "snapshots", "files", "partitions");
    /** {@code lake.system.history}: the whole lakehouse's versions. */
    private static final String SYSTEM_NAMESPACE = "system";

    private MetadataTables() {
    }

    /**
     * The metadata table {@code ident} names, or null if it names none. {@code pinned} carries the
     * {@code version} or {@code timestamp_us} of a time travel (or neither).
     */
    static Table load(LakehouseCatalog catalog, Identifier ident, ObjectNode pinned) throws NoSuchTableException {
        String last = ident.name().toLowerCase(Locale.ROOT);
        String[] namespace = ident.namespace();
        ObjectNode args = ControlPlane.args();
        for (String key : new String[] {"version", "timestamp_us"}) {
            if (pinned.has(key)) {
                args.set(key, pinned.get(key));
            }
        }
        if (namespace.length == 1 && namespace[0].equalsIgnoreCase(SYSTEM_NAMESPACE) && last.equals("history")) {
            args.put("kind", "lakehouse_history");
        } else if (namespace.length >= 2 && TABLE_KINDS.contains(last)) {
            args.put("kind", last);
            ArrayNode parts = args.putArray("name");
            for (String part : namespace) {
                parts.add(part);
            }
        } else {
            return null;
        }
        JsonNode answer;
        try {
            answer = catalog.control().call("metadata_table", args);
        } catch (RuntimeException e) {
            if (e instanceof CatalogFailure failure
                    && (failure.kind().equals("no_such_table") || failure.kind().equals("no_such_namespace"))) {
                throw new NoSuchTableException(ident);
            }
            throw e;
        }
        StructType schema = (StructType) DataType.fromJson(answer.get("schema").toString());
        JsonNode rows = answer.get("rows");
        InternalRow[] converted = new InternalRow[rows.size()];
        for (int i = 0; i < converted.length; i++) {
            converted[i] = row(rows.get(i), schema);
        }
        String name = catalog.name() + "." + String.join(".", namespace) + "." + ident.name();
        return new MetadataTable(name, schema, converted);
    }

    /**
     * The rows of the {@code partitions} metadata table of {@code table} at the version it was
     * loaded at: each row's first field is its partition ({@link ReadOnlyPartitions}).
     */
    static InternalRow[] partitionRows(LakehouseTable table) {
        ObjectNode args = ControlPlane.args();
        args.put("kind", "partitions");
        ArrayNode parts = args.putArray("name");
        table.nameParts.forEach(parts::add);
        if (table.txn == null) {
            args.put("version", table.version);
        }
        JsonNode answer = table.catalog.control().call("metadata_table", args);
        StructType schema = (StructType) DataType.fromJson(answer.get("schema").toString());
        JsonNode rows = answer.get("rows");
        InternalRow[] out = new InternalRow[rows.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = row(rows.get(i), schema);
        }
        return out;
    }

    /** A JSON row (a list, in the schema's field order) as Spark's row. */
    static InternalRow row(JsonNode values, StructType schema) {
        Object[] out = new Object[schema.fields().length];
        for (int i = 0; i < out.length; i++) {
            out[i] = value(values.get(i), schema.fields()[i].dataType());
        }
        return new GenericInternalRow(out);
    }

    /** One JSON value as Spark's internal value of {@code type} (see control_metadata.py for the encoding). */
    static Object value(JsonNode node, DataType type) {
        if (node == null || node.isNull()) {
            return null;
        }
        if (type instanceof StringType) {
            return UTF8String.fromString(node.asText());
        }
        if (type instanceof LongType || type instanceof TimestampType || type instanceof TimestampNTZType) {
            return node.asLong();
        }
        if (type instanceof IntegerType || type instanceof DateType) {
            return node.asInt();
        }
        if (type instanceof ShortType) {
            return (short) node.asInt();
        }
        if (type instanceof ByteType) {
            return (byte) node.asInt();
        }
        if (type instanceof BooleanType) {
            return node.asBoolean();
        }
        if (type instanceof DoubleType) {
            return node.asDouble();
        }
        if (type instanceof FloatType) {
            return (float) node.asDouble();
        }
        if (type instanceof DecimalType decimal) {
            return Decimal.apply(new java.math.BigDecimal(node.asText()), decimal.precision(), decimal.scale());
        }
        if (type instanceof BinaryType) {
            return Base64.getDecoder().decode(node.asText());
        }
        if (type instanceof StructType struct) {
            return row(node, struct);
        }
        if (type instanceof MapType map) {
            Object[] keys = new Object[node.size()];
            Object[] items = new Object[node.size()];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = value(node.get(i).get(0), map.keyType());
                items[i] = value(node.get(i).get(1), map.valueType());
            }
            return new ArrayBasedMapData(new GenericArrayData(keys), new GenericArrayData(items));
        }
        if (type instanceof ArrayType array) {
            Object[] items = new Object[node.size()];
            for (int i = 0; i < items.length; i++) {
                items[i] = value(node.get(i), array.elementType());
            }
            return new GenericArrayData(items);
        }
        throw new IllegalStateException("metadata table value of type " + type.simpleString() + " is not expected");
    }

    /** A metadata table as loaded: its rows are fixed, so every scan of one query reads the same. */
    private record MetadataTable(String name, StructType schema, InternalRow[] rows) implements SupportsRead {
        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ);
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return schema;
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            Options.refuseAll(options, "read of a metadata table");
            return () -> new LocalScan() {
                @Override
                public InternalRow[] rows() {
                    return rows;
                }

                @Override
                public StructType readSchema() {
                    return schema;
                }

                @Override
                public String description() {
                    return "lakehouse metadata table " + name;
                }
            };
        }
    }
}
