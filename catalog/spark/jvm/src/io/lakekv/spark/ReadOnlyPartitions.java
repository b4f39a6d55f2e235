package io.lakekv.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsPartitionManagement;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * {@code SHOW PARTITIONS} for a lakehouse table: its partitions are the distinct partition
 * values of its live files at the version it was loaded at, listed by the control plane
 * (the {@code partitions} metadata table, {@link MetadataTables#partitionRows}).
 *
 * <p>Read-only: a partition exists because files hold rows in it, so there is nothing to add
 * or drop on its own. {@code ALTER TABLE ... ADD/DROP PARTITION} is refused with what to do
 * instead; {@code DELETE FROM t WHERE p = ...} removes a partition's rows.
 */
interface ReadOnlyPartitions extends SupportsPartitionManagement {
    private LakehouseTable table() {
        return (LakehouseTable) this;
    }

    @Override
    default StructType partitionSchema() {
        LakehouseTable table = table();
        StructType schema = table.schema();
        return new StructType(Arrays.stream(table.partitionColumns).map(schema::apply).toArray(StructField[]::new));
    }

    @Override
    default void createPartition(InternalRow ident, Map<String, String> properties) {
        throw refused("ADD PARTITION", "a partition appears when rows are written into it (INSERT INTO)");
    }

    @Override
    default boolean dropPartition(InternalRow ident) {
        throw refused("DROP PARTITION", "DELETE FROM " + table().name() + " WHERE <partition column> = <value> removes a partition's rows");
    }

    @Override
    default void replacePartitionMetadata(InternalRow ident, Map<String, String> properties) {
        throw refused("partition properties", "partitions have no properties of their own");
    }

    @Override
    default Map<String, String> loadPartitionMetadata(InternalRow ident) {
        return Map.of();
    }

    @Override
    default InternalRow[] listPartitionIdentifiers(String[] names, InternalRow ident) {
        StructType partitionSchema = partitionSchema();
        int[] ordinals = Arrays.stream(names).mapToInt(partitionSchema::fieldIndex).toArray();
        DataType[] types = Arrays.stream(ordinals).mapToObj(i -> partitionSchema.fields()[i].dataType()).toArray(DataType[]::new);
        List<InternalRow> out = new ArrayList<>();
        for (InternalRow row : MetadataTables.partitionRows(table())) {
            InternalRow partition = row.getStruct(0, partitionSchema.size());
            boolean matches = true;
            for (int i = 0; i < ordinals.length && matches; i++) {
                Object have = partition.isNullAt(ordinals[i]) ? null : partition.get(ordinals[i], types[i]);
                Object want = ident.isNullAt(i) ? null : ident.get(i, types[i]);
                matches = Objects.equals(have, want);
            }
            if (matches) {
                out.add(partition);
            }
        }
        return out.toArray(new InternalRow[0]);
    }

    private UnsupportedOperationException refused(String what, String instead) {
        return new UnsupportedOperationException(what + " on " + table().name()
                + ": lakehouse partitions are read-only (SHOW PARTITIONS lists them); " + instead + ". Nothing was changed");
    }
}
