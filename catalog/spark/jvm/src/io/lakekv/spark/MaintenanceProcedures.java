package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.parser.CatalystSqlParser$;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.procedures.BoundProcedure;
import org.apache.spark.sql.connector.catalog.procedures.ProcedureParameter;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Table maintenance and recovery from SQL: {@code CALL <catalog>.system.<procedure>(name => value, ...)}.
 *
 * <p>Each procedure sends one request to the control plane
 * ({@code catalog/spark/control_procedures.py}), which calls the Python API of
 * the same name, and returns one row:
 * <ul>
 * <li>{@code rewrite_data_files(table, where, target_file_size_bytes, strategy => 'binpack'|'sort', sort_order)}
 * <li>{@code rollback_to_version(table, version)}, {@code rollback_to_timestamp(table, timestamp)}
 * <li>{@code expire_versions(older_than, retain_last, dry_run)}, {@code remove_orphan_files(older_than, dry_run)}
 * <li>{@code add_files(table, source)}, {@code verify(table)}
 * </ul>
 * Spark binds the named arguments against {@link #parameters}: an unknown or missing one, or one
 * that does not cast to its type, is Spark's error naming it. They act on the live lakehouse and
 * commit on their own, so they are refused inside a session's transaction.
 */
final class MaintenanceProcedures {
    private static final DataType STRINGS = DataTypes.createArrayType(DataTypes.StringType, false);
    private static final StructType GC_ROW = new StructType()
            .add("deleted_data_files_count", DataTypes.IntegerType, false)
            .add("deleted_orphan_files_count", DataTypes.IntegerType, false)
            .add("bytes_freed", DataTypes.LongType, false)
            .add("floor_version", DataTypes.LongType, false)
            .add("dry_run", DataTypes.BooleanType, false)
            .add("files", STRINGS, false);
    private static final StructType ROLLBACK_ROW = new StructType()
            .add("previous_version", DataTypes.LongType, false)
            .add("target_version", DataTypes.LongType, false)
            .add("version", DataTypes.LongType, true)
            .add("files_restored", DataTypes.IntegerType, false)
            .add("files_removed", DataTypes.IntegerType, false)
            .add("schema_changed", DataTypes.BooleanType, false);

    private static final Map<String, Spec> SPECS = new LinkedHashMap<>();

    static {
        add(new Spec("rewrite_data_files", "compact a table's data files (binpack or sort), rebasing over concurrent writes",
                new ProcedureParameter[] {
                    ProcedureParameter.in("table", DataTypes.StringType).build(),
                    ProcedureParameter.in("where", DataTypes.StringType).defaultValue("NULL").build(),
                    ProcedureParameter.in("target_file_size_bytes", DataTypes.LongType).defaultValue("NULL").build(),
                    ProcedureParameter.in("strategy", DataTypes.StringType).defaultValue("'binpack'").build(),
                    ProcedureParameter.in("sort_order", DataTypes.StringType).defaultValue("NULL").build(),
                },
                new StructType()
                        .add("rewritten_data_files_count", DataTypes.IntegerType, false)
                        .add("added_data_files_count", DataTypes.IntegerType, false)
                        .add("rewritten_bytes_count", DataTypes.LongType, false)
                        .add("added_bytes_count", DataTypes.LongType, false)
                        .add("version", DataTypes.LongType, true)
                        .add("attempts", DataTypes.IntegerType, false)));
        add(new Spec("rollback_to_version", "commit a table back to its rows and schema at a lakehouse version",
                new ProcedureParameter[] {
                    ProcedureParameter.in("table", DataTypes.StringType).build(),
                    ProcedureParameter.in("version", DataTypes.LongType).build(),
                },
                ROLLBACK_ROW));
        add(new Spec("rollback_to_timestamp", "commit a table back to its rows and schema at a time",
                new ProcedureParameter[] {
                    ProcedureParameter.in("table", DataTypes.StringType).build(),
                    ProcedureParameter.in("timestamp", DataTypes.TimestampType).build(),
                },
                ROLLBACK_ROW));
        add(new Spec("expire_versions", "delete the data files only versions older than older_than read",
                new ProcedureParameter[] {
                    ProcedureParameter.in("older_than", DataTypes.TimestampType).defaultValue("NULL").build(),
                    ProcedureParameter.in("retain_last", DataTypes.IntegerType).defaultValue("1").build(),
                    ProcedureParameter.in("dry_run", DataTypes.BooleanType).defaultValue("false").build(),
                },
                GC_ROW));
        add(new Spec("remove_orphan_files", "delete files no version references, older than older_than",
                new ProcedureParameter[] {
                    ProcedureParameter.in("older_than", DataTypes.TimestampType).defaultValue("NULL").build(),
                    ProcedureParameter.in("dry_run", DataTypes.BooleanType).defaultValue("false").build(),
                },
                GC_ROW));
        add(new Spec("add_files", "import Parquet files (or a Hive-style directory) inside the lakehouse in place",
                new ProcedureParameter[] {
                    ProcedureParameter.in("table", DataTypes.StringType).build(),
                    ProcedureParameter.in("source", DataTypes.StringType).build(),
                },
                new StructType()
                        .add("added_files_count", DataTypes.IntegerType, false)
                        .add("added_rows_count", DataTypes.LongType, false)
                        .add("added_bytes_count", DataTypes.LongType, false)
                        .add("version", DataTypes.LongType, true)));
        add(new Spec("verify", "check the store and every retained data file (with table: that table's problems)",
                new ProcedureParameter[] {ProcedureParameter.in("table", DataTypes.StringType).defaultValue("NULL").build()},
                new StructType()
                        .add("ok", DataTypes.BooleanType, false)
                        .add("store_ok", DataTypes.BooleanType, false)
                        .add("floor_version", DataTypes.LongType, false)
                        .add("head_version", DataTypes.LongType, false)
                        .add("files_checked", DataTypes.IntegerType, false)
                        .add("problems", STRINGS, false)));
    }

    private MaintenanceProcedures() {
    }

    private static void add(Spec spec) {
        SPECS.put(spec.name, spec);
    }

    static List<String> names() {
        return List.copyOf(SPECS.keySet());
    }

    static Identifier[] list(String[] namespace) {
        if (!Arrays.equals(namespace, new String[] {TransactionProcedures.NAMESPACE})) {
            return new Identifier[0];
        }
        return SPECS.keySet().stream()
                .map(n -> Identifier.of(new String[] {TransactionProcedures.NAMESPACE}, n)).toArray(Identifier[]::new);
    }

    /** The procedure {@code ident} names, or null if it is none of these. */
    static UnboundProcedure load(LakehouseCatalog catalog, Identifier ident) {
        Spec spec = SPECS.get(ident.name());
        if (spec == null || !Arrays.equals(ident.namespace(), new String[] {TransactionProcedures.NAMESPACE})) {
            return null;
        }
        return new Procedure(catalog, spec);
    }

    private record Spec(String name, String description, ProcedureParameter[] parameters, StructType output) {
    }

    private static final class Procedure implements UnboundProcedure, BoundProcedure {
        private final LakehouseCatalog catalog;
        private final Spec spec;

        Procedure(LakehouseCatalog catalog, Spec spec) {
            this.catalog = catalog;
            this.spec = spec;
        }

        @Override
        public String name() {
            return spec.name;
        }

        @Override
        public String description() {
            return spec.description;
        }

        /**
         * Refuses an argument whose type Spark would cast to the parameter's only by parsing
         * or truncating (a string for a number): the error then names the argument.
         */
        @Override
        public BoundProcedure bind(StructType inputType) {
            StructField[] given = inputType.fields();
            for (int i = 0; i < given.length; i++) {
                ProcedureParameter param = i < spec.parameters.length ? spec.parameters[i] : null;
                for (ProcedureParameter p : spec.parameters) {
                    if (p.name().equals(given[i].name())) {
                        param = p;
                    }
                }
                if (param != null && !accepts(param.dataType(), given[i].dataType())) {
                    throw new LakehouseException.InvalidArgument("invalid_argument", spec.name + ": argument "
                            + param.name() + " must be " + param.dataType().sql() + ", not " + given[i].dataType().sql());
                }
            }
            return this;
        }

        private static boolean accepts(DataType want, DataType have) {
            if (have.equals(want) || have.equals(DataTypes.NullType)) {
                return true;
            }
            if (want.equals(DataTypes.LongType) || want.equals(DataTypes.IntegerType)) {
                return have.equals(DataTypes.IntegerType) || have.equals(DataTypes.ShortType)
                        || have.equals(DataTypes.ByteType) || have.equals(DataTypes.LongType)
                        || (have instanceof DecimalType d && d.scale() == 0);
            }
            if (want.equals(DataTypes.TimestampType)) {
                return have.equals(DataTypes.TimestampNTZType) || have.equals(DataTypes.DateType)
                        || have.equals(DataTypes.StringType);
            }
            return false;
        }

        @Override
        public boolean isDeterministic() {
            return false;
        }

        @Override
        public ProcedureParameter[] parameters() {
            return spec.parameters;
        }

        @Override
        public Iterator<Scan> call(InternalRow input) {
            String txn = catalog.sessionTransaction();
            if (txn != null) {
                throw new LakehouseException.InvalidArgument("invalid_argument", spec.name
                        + " commits on its own and cannot run inside this session's transaction " + txn
                        + "; commit or abort it (or RESET " + catalog.transactionKey() + ") first");
            }
            ObjectNode args = ControlPlane.args();
            ProcedureParameter[] params = spec.parameters;
            for (int i = 0; i < params.length; i++) {
                String name = params[i].name();
                DataType type = params[i].dataType();
                if (input.isNullAt(i)) {
                    if (params[i].defaultValue() == null) {
                        throw new LakehouseException.InvalidArgument("invalid_argument",
                                spec.name + ": argument " + name + " must not be NULL");
                    }
                    continue;
                }
                if (name.equals("table")) {
                    args.set("table", tableName(input.getUTF8String(i).toString()));
                } else if (type.equals(DataTypes.StringType)) {
                    args.put(name, input.getUTF8String(i).toString());
                } else if (type.equals(DataTypes.LongType)) {
                    args.put(name, input.getLong(i));
                } else if (type.equals(DataTypes.IntegerType)) {
                    args.put(name, input.getInt(i));
                } else if (type.equals(DataTypes.BooleanType)) {
                    args.put(name, input.getBoolean(i));
                } else if (type.equals(DataTypes.TimestampType)) {
                    args.put(name + "_us", input.getLong(i));  // microseconds since the epoch, as Spark keeps them
                } else {
                    throw new IllegalStateException(spec.name + ": parameter " + name + " of unhandled type " + type);
                }
            }
            JsonNode answer = catalog.control().call(spec.name, args);
            StructType output = spec.output;
            Object[] values = new Object[output.size()];
            for (int i = 0; i < values.length; i++) {
                values[i] = value(output.fields()[i], answer.path(output.fields()[i].name()));
            }
            return TransactionProcedures.result(output, values);
        }

        /** {@code 'ns.t'} (or {@code '<catalog>.ns.t'}, or with backquoted parts) as the name parts. */
        private ArrayNode tableName(String text) {
            List<String> parts;
            try {
                parts = new ArrayList<>(CollectionConverters.asJava(CatalystSqlParser$.MODULE$.parseMultipartIdentifier(text)));
            } catch (Exception e) {  // a ParseException, which Scala does not declare
                throw new LakehouseException.InvalidArgument("invalid_argument",
                        spec.name + ": argument table is not a table name: '" + text + "'");
            }
            if (parts.size() > 2 && parts.get(0).equals(catalog.name())) {
                parts.remove(0);
            }
            ArrayNode out = ControlPlane.JSON.createArrayNode();
            parts.forEach(out::add);
            return out;
        }

        private static Object value(StructField field, JsonNode node) {
            if (node.isMissingNode() || node.isNull()) {
                if (!field.nullable()) {
                    throw new IllegalStateException("the control plane's answer lacks " + field.name());
                }
                return null;
            }
            DataType type = field.dataType();
            if (type.equals(DataTypes.LongType)) {
                return node.asLong();
            } else if (type.equals(DataTypes.IntegerType)) {
                return node.asInt();
            } else if (type.equals(DataTypes.BooleanType)) {
                return node.asBoolean();
            } else if (type instanceof ArrayType) {
                List<Object> items = new ArrayList<>();
                node.forEach(item -> items.add(UTF8String.fromString(item.asText())));
                return new GenericArrayData(items.toArray());
            }
            return UTF8String.fromString(node.asText());
        }
    }
}
