package io.lakekv.spark;

import org.apache.spark.sql.catalyst.util.CharVarcharUtils;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.Map;

/**
 * Column types of CREATE TABLE and ALTER TABLE as the catalog stores them.
 *
 * <p>{@code CHAR(n)}/{@code VARCHAR(n)} are stored as strings, as Iceberg does,
 * with Spark's own field metadata ({@code __CHAR_VARCHAR_TYPE_STRING}, the form
 * {@link CharVarcharUtils} gives them): the table reports it back on load, so
 * Spark applies its length rules on write and pads CHAR on read.
 *
 * <p>A collation other than the default {@code UTF8_BINARY} is refused, naming
 * the COLLATE clause: the catalog compares strings by their bytes when it prunes
 * files and deletes rows, so a collated column would answer otherwise than Spark.
 */
final class ColumnTypes {
    private ColumnTypes() {
    }

    /** The schema of a CREATE TABLE as the control plane gets it. */
    static StructType forCreate(StructType schema, Map<String, String> properties) {
        String collation = properties.get(TableCatalog.PROP_COLLATION);
        if (collation != null && !collation.equalsIgnoreCase("UTF8_BINARY")) {
            throw refused("CREATE TABLE: DEFAULT COLLATION " + collation);
        }
        for (StructField field : schema.fields()) {
            String named = collation(field.dataType());
            if (named != null) {
                throw refused("CREATE TABLE: column " + field.name() + " " + field.dataType().sql());
            }
        }
        return CharVarcharUtils.replaceCharVarcharWithStringInSchema(schema);
    }

    /** A stored schema as the table reports it to Spark: CHAR/VARCHAR columns with their own types again. */
    static StructType forSpark(StructType stored) {
        return CharVarcharUtils.getRawSchema(stored);
    }

    /** Refuses an ALTER TABLE change to a collated, CHAR or VARCHAR type (nothing is changed). */
    static void checkAlter(TableChange change) {
        DataType type = null;
        String[] column = null;
        if (change instanceof TableChange.AddColumn c) {
            type = c.dataType();
            column = c.fieldNames();
        } else if (change instanceof TableChange.UpdateColumnType c) {
            type = c.newDataType();
            column = c.fieldNames();
        }
        if (type == null) {
            return;
        }
        String name = String.join(".", column);
        if (collation(type) != null) {
            throw refused("ALTER TABLE: column " + name + " " + type.sql());
        }
        if (CharVarcharUtils.hasCharVarchar(type)) {
            throw new LakehouseException.InvalidArgument("invalid_argument",
                    "ALTER TABLE: column " + name + " " + type.sql() + ": CHAR/VARCHAR columns can be declared only "
                    + "in CREATE TABLE by the lakehouse catalog (use STRING); nothing was changed");
        }
    }

    /** The first collation other than UTF8_BINARY in a type (nested types too), or null. */
    static String collation(DataType type) {
        if (type instanceof StringType s) {
            return s.isUTF8BinaryCollation() ? null : s.collationName();
        }
        if (type instanceof ArrayType a) {
            return collation(a.elementType());
        }
        if (type instanceof MapType m) {
            String key = collation(m.keyType());
            return key != null ? key : collation(m.valueType());
        }
        if (type instanceof StructType s) {
            for (StructField field : s.fields()) {
                String named = collation(field.dataType());
                if (named != null) {
                    return named;
                }
            }
        }
        return null;
    }

    private static LakehouseException.InvalidArgument refused(String what) {
        return new LakehouseException.InvalidArgument("invalid_argument", what + ": the COLLATE clause is not "
                + "supported by the lakehouse catalog, which compares strings by their bytes (UTF8_BINARY) when it "
                + "prunes files and deletes rows; declare the column without COLLATE");
    }
}
