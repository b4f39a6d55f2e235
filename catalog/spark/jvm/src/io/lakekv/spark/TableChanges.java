package io.lakekv.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.types.DataType;

import java.io.IOException;

/**
 * ALTER TABLE changes in the control plane's JSON form.
 *
 * <p>What the catalog does not support (column positions, nullability,
 * defaults, nested columns...) is an error naming the clause,
 * never dropped.
 */
final class TableChanges {
    private TableChanges() {
    }

    static ObjectNode encode(TableChange change) {
        ObjectNode node = ControlPlane.args();
        if (change instanceof TableChange.SetProperty c) {
            node.put("type", "set_property").put("key", c.property()).put("value", c.value());
        } else if (change instanceof TableChange.RemoveProperty c) {
            node.put("type", "remove_property").put("key", c.property());
        } else if (change instanceof TableChange.AddColumn c) {
            if (c.position() != null) {
                throw unsupported("ADD COLUMN ... FIRST/AFTER (columns are added last)");
            }
            if (c.defaultValue() != null) {
                throw unsupported("ADD COLUMN ... DEFAULT");
            }
            if (!c.isNullable()) {
                throw unsupported("ADD COLUMN ... NOT NULL (existing rows have no value)");
            }
            node.put("type", "add_column").put("comment", c.comment());
            column(node, c.fieldNames());
            node.set("data_type", type(c.dataType()));
        } else if (change instanceof TableChange.RenameColumn c) {
            node.put("type", "rename_column").put("new_name", c.newName());
            column(node, c.fieldNames());
        } else if (change instanceof TableChange.DeleteColumn c) {
            node.put("type", "drop_column").put("if_exists", c.ifExists());
            column(node, c.fieldNames());
        } else if (change instanceof TableChange.UpdateColumnType c) {
            node.put("type", "update_column_type");
            column(node, c.fieldNames());
            node.set("data_type", type(c.newDataType()));
        } else if (change instanceof TableChange.UpdateColumnComment c) {
            node.put("type", "update_column_comment").put("comment", c.newComment());
            column(node, c.fieldNames());
        } else {
            throw unsupported(change.getClass().getSimpleName());
        }
        return node;
    }

    private static void column(ObjectNode node, String[] fieldNames) {
        ArrayNode parts = node.putArray("column");
        for (String part : fieldNames) {
            parts.add(part);
        }
    }

    private static com.fasterxml.jackson.databind.JsonNode type(DataType type) {
        try {
            return ControlPlane.JSON.readTree(type.json());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static IllegalArgumentException unsupported(String what) {
        return new LakehouseException.InvalidArgument("invalid_argument",
                "ALTER TABLE: " + what + " is not supported by the lakehouse catalog; nothing was changed");
    }
}
