package io.lakekv.spark;

import org.apache.spark.sql.connector.distributions.Distribution;
import org.apache.spark.sql.connector.distributions.Distributions;
import org.apache.spark.sql.connector.expressions.Expressions;
import org.apache.spark.sql.connector.expressions.NullOrdering;
import org.apache.spark.sql.connector.expressions.SortDirection;
import org.apache.spark.sql.connector.expressions.SortOrder;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The order Spark's native writes put a table's rows in: its partition columns, then the
 * table property {@value #PROPERTY} ({@code "col [ASC|DESC], ..."}).
 *
 * <p>With the property set, a write asks Spark for a range distribution on that order
 * (as Iceberg's {@code WRITE ORDERED BY} with its default {@code range} distribution mode)
 * and for the rows sorted within each task: each task's file then covers its own range of
 * the key, so a selective query on it skips whole files by their statistics, and row groups
 * inside the files it reads. Spark's SQL has no {@code WRITE ORDERED BY} without Iceberg's
 * SQL extensions, hence a property ({@code ALTER TABLE ... SET TBLPROPERTIES}).
 * Without it, rows are only sorted by the partition columns (a file per partition).
 */
final class WriteOrder {
    static final String PROPERTY = "write.ordered-by";

    private WriteOrder() {
    }

    /** The table's write order: partition columns, then {@value #PROPERTY}; a column the table lacks is refused. */
    static SortOrder[] of(LakehouseTable table) {
        List<SortOrder> order = new ArrayList<>();
        for (String column : table.partitionColumns) {
            order.add(Expressions.sort(Expressions.column(column), SortDirection.ASCENDING));
        }
        String spec = table.properties.get(PROPERTY);
        if (spec == null || spec.isBlank()) {
            return order.toArray(SortOrder[]::new);
        }
        List<String> names = Arrays.asList(table.schema.fieldNames());
        for (String term : spec.split(",")) {
            String[] words = term.trim().split("\\s+");
            String column = words[0];
            SortDirection direction = SortDirection.ASCENDING;
            if (words.length == 2 && words[1].equalsIgnoreCase("desc")) {
                direction = SortDirection.DESCENDING;
            } else if (words.length > 2 || (words.length == 2 && !words[1].equalsIgnoreCase("asc"))) {
                throw invalid(table, "'" + term.trim() + "' is not a column name, optionally followed by ASC or DESC");
            }
            if (column.isEmpty() || !names.contains(column)) {
                throw invalid(table, "no column '" + column + "' (columns: " + String.join(", ", names) + ")");
            }
            NullOrdering nulls = direction == SortDirection.ASCENDING ? NullOrdering.NULLS_FIRST : NullOrdering.NULLS_LAST;
            order.add(Expressions.sort(Expressions.column(column), direction, nulls));
        }
        return order.toArray(SortOrder[]::new);
    }

    /** Ranges of the write order across tasks when the property is set; else none asked for. */
    static Distribution distribution(LakehouseTable table, SortOrder[] order) {
        String spec = table.properties.get(PROPERTY);
        return spec == null || spec.isBlank() ? Distributions.unspecified() : Distributions.ordered(order);
    }

    /** A write that cannot honour {@value #PROPERTY} (through the Python source) is refused while the table has it. */
    static void refuseUnhonoured(LakehouseTable table) {
        String spec = table.properties.get(PROPERTY);
        if (spec != null && !spec.isBlank()) {
            throw new LakehouseException.InvalidArgument("invalid_argument", "write into " + table.name()
                    + ": table property " + PROPERTY + " is honoured by Spark's own Parquet writer only, and this table's"
                    + " storage (or a column type) is written through the Python source here; UNSET the property to"
                    + " write unordered. Nothing was written");
        }
    }

    private static RuntimeException invalid(LakehouseTable table, String why) {
        return new LakehouseException.InvalidArgument("invalid_argument", "table property " + PROPERTY + " of "
                + table.name() + ": " + why.toLowerCase(Locale.ROOT).charAt(0) + why.substring(1) + "; nothing was written");
    }
}
