package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.procedures.BoundProcedure;
import org.apache.spark.sql.connector.catalog.procedures.ProcedureParameter;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import java.util.Arrays;
import java.util.Iterator;
import java.util.List;

/**
 * Durable transactions from SQL alone: {@code CALL <catalog>.system.<procedure>(...)}.
 *
 * <ul>
 * <li>{@code begin_transaction(title => NULL, timeout_s => 3600)} begins a durable
 *     transaction, makes it this session's ({@code spark.sql.catalog.<catalog>.transaction})
 *     and returns its id. The timeout (capped by the store's maximum) is how long it
 *     lives without a statement using it: each request in it pings it.
 * <li>{@code commit_transaction(id => NULL)} commits the given transaction, or the
 *     session's; every staged write becomes visible as one lakehouse version, which it
 *     returns. If it was the session's, the session leaves it.
 * <li>{@code abort_transaction(id => NULL)} aborts it likewise (its files go at gc).
 * </ul>
 * Another application joins a transaction with {@code SET spark.sql.catalog.<catalog>.transaction=<id>}.
 */
final class TransactionProcedures {
    static final String NAMESPACE = "system";
    private static final List<String> NAMES = List.of("begin_transaction", "commit_transaction", "abort_transaction");
    /** An hour (the store's default maximum): a statement may run that long between two requests of its session. */
    static final double DEFAULT_TIMEOUT_S = 3600;

    private TransactionProcedures() {
    }

    static Identifier[] list(String[] namespace) {
        if (!Arrays.equals(namespace, new String[] {NAMESPACE})) {
            return new Identifier[0];
        }
        return NAMES.stream().map(n -> Identifier.of(new String[] {NAMESPACE}, n)).toArray(Identifier[]::new);
    }

    static UnboundProcedure load(LakehouseCatalog catalog, Identifier ident) {
        if (!Arrays.equals(ident.namespace(), new String[] {NAMESPACE}) || !NAMES.contains(ident.name())) {
            throw new LakehouseException.InvalidArgument("no_such_procedure", "no procedure "
                    + catalog.name() + "." + String.join(".", ident.namespace()) + (ident.namespace().length > 0 ? "." : "")
                    + ident.name() + "; the lakehouse catalog has " + catalog.name() + "." + NAMESPACE + "."
                    + String.join(", " + catalog.name() + "." + NAMESPACE + ".",
                            java.util.stream.Stream.concat(NAMES.stream(), MaintenanceProcedures.names().stream()).toList()));
        }
        return switch (ident.name()) {
            case "begin_transaction" -> new Begin(catalog);
            case "commit_transaction" -> new Finish(catalog, "commit");
            default -> new Finish(catalog, "abort");
        };
    }

    /** One result row, as every procedure of the plugin answers. */
    static Iterator<Scan> result(StructType schema, Object... values) {
        InternalRow row = new GenericInternalRow(values);
        LocalScan scan = new LocalScan() {
            @Override
            public InternalRow[] rows() {
                return new InternalRow[] {row};
            }

            @Override
            public StructType readSchema() {
                return schema;
            }
        };
        return List.<Scan>of(scan).iterator();
    }

    /** Both the unbound and the bound procedure: the parameters do not depend on the argument types. */
    private abstract static class Procedure implements UnboundProcedure, BoundProcedure {
        final LakehouseCatalog catalog;

        Procedure(LakehouseCatalog catalog) {
            this.catalog = catalog;
        }

        @Override
        public BoundProcedure bind(StructType inputType) {
            return this;
        }

        @Override
        public boolean isDeterministic() {
            return false;
        }
    }

    private static final class Begin extends Procedure {
        private static final StructType OUTPUT = new StructType().add("transaction_id", DataTypes.StringType, false);

        Begin(LakehouseCatalog catalog) {
            super(catalog);
        }

        @Override
        public String name() {
            return "begin_transaction";
        }

        @Override
        public String description() {
            return "begin a durable transaction and make it this session's; returns its id";
        }

        @Override
        public ProcedureParameter[] parameters() {
            return new ProcedureParameter[] {
                ProcedureParameter.in("title", DataTypes.StringType).defaultValue("NULL").build(),
                ProcedureParameter.in("timeout_s", DataTypes.DoubleType).defaultValue(Double.toString(DEFAULT_TIMEOUT_S)).build(),
            };
        }

        @Override
        public Iterator<Scan> call(InternalRow input) {
            String current = catalog.sessionTransaction();
            if (current != null) {
                throw new LakehouseException.InvalidArgument("invalid_argument", "this session already works in transaction "
                        + current + " (" + catalog.transactionKey() + "); commit or abort it, or RESET "
                        + catalog.transactionKey() + ", before beginning another");
            }
            double timeout = input.isNullAt(1) ? DEFAULT_TIMEOUT_S : input.getDouble(1);
            if (!(timeout > 0) || Double.isInfinite(timeout)) {
                throw new LakehouseException.InvalidArgument("invalid_argument",
                        "begin_transaction: timeout_s must be a positive number of seconds, not " + timeout);
            }
            ObjectNode args = ControlPlane.args();
            args.put("title", input.isNullAt(0) ? "spark sql" : input.getUTF8String(0).toString());
            args.put("timeout_s", timeout);
            String txn = catalog.control().call("begin", args).asText();
            SQLConf.get().setConfString(catalog.transactionKey(), txn);
            return result(OUTPUT, UTF8String.fromString(txn));
        }
    }

    private static final class Finish extends Procedure {
        private final String action;

        Finish(LakehouseCatalog catalog, String action) {
            super(catalog);
            this.action = action;
        }

        @Override
        public String name() {
            return action + "_transaction";
        }

        @Override
        public String description() {
            return action + " a durable transaction (by default this session's)";
        }

        @Override
        public ProcedureParameter[] parameters() {
            return new ProcedureParameter[] {ProcedureParameter.in("id", DataTypes.StringType).defaultValue("NULL").build()};
        }

        @Override
        public Iterator<Scan> call(InternalRow input) {
            String session = catalog.sessionTransaction();
            String txn = input.isNullAt(0) ? session : input.getUTF8String(0).toString().trim();
            if (txn == null || txn.isEmpty()) {
                throw new LakehouseException.InvalidArgument("invalid_argument", name()
                        + ": this session works in no transaction (" + catalog.transactionKey() + " is not set); name one with id => '...'");
            }
            ObjectNode args = ControlPlane.args();
            args.put("txn", txn);
            JsonNode answer;
            try {
                answer = catalog.control().call(action, args);
            } catch (RuntimeException e) {
                if (action.equals("abort") && txn.equals(session)) {
                    // An abort that fails (the transaction expired or finished) still leaves the
                    // session out of it; a failed commit keeps it, to be aborted.
                    SQLConf.get().unsetConf(catalog.transactionKey());
                }
                throw e;
            }
            if (txn.equals(session)) {
                SQLConf.get().unsetConf(catalog.transactionKey());
            }
            if (action.equals("commit")) {
                StructType output = new StructType()
                        .add("transaction_id", DataTypes.StringType, false)
                        .add("version", DataTypes.LongType, false);
                return result(output, UTF8String.fromString(txn), answer.asLong());
            }
            return result(new StructType().add("transaction_id", DataTypes.StringType, false), UTF8String.fromString(txn));
        }
    }
}
