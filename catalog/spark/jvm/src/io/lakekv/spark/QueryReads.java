package io.lakekv.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.transactions.Transaction;
import org.apache.spark.sql.connector.read.Scan;

/**
 * The lakehouse tables one write query read: Spark's catalog transaction
 * ({@link LakehouseCatalog#beginTransaction}) for that query.
 *
 * <p>Spark begins it when it plans a write into this catalog and closes it
 * when the query ends; every scan of a table of this catalog that the query
 * plans on that thread meanwhile is recorded here (table, id, version,
 * pushed filters), and the write's commit sends them along, so the control
 * plane commits the write and checks the reads in one lakehouse transaction
 * ({@code catalog/spark/commits.py}): the write is serializable with every
 * other commit. Time-travel reads ({@code VERSION AS OF}) read an immutable
 * version and are not recorded.
 *
 * <p>The write itself commits at {@code BatchWrite.commit}, which Spark calls
 * before it commits this transaction, so {@link #commit} and {@link #abort}
 * have nothing left to do: a failed write has already deleted its files.
 */
final class QueryReads implements Transaction {
    private static final ThreadLocal<QueryReads> ACTIVE = new ThreadLocal<>();

    private final LakehouseCatalog catalog;
    private final ArrayNode reads = ControlPlane.JSON.createArrayNode();

    private QueryReads(LakehouseCatalog catalog) {
        this.catalog = catalog;
    }

    static QueryReads begin(LakehouseCatalog catalog) {
        QueryReads reads = new QueryReads(catalog);
        ACTIVE.set(reads);
        return reads;
    }

    /** Records a scan of {@code table} if a write query of its catalog is being planned on this thread. */
    static void record(LakehouseTable table, ArrayNode filters) {
        QueryReads active = ACTIVE.get();
        if (active == null || active.catalog != table.catalog || table.timeTravel || table.txn != null) {
            return;
        }
        synchronized (active) {
            ObjectNode read = active.reads.addObject();
            ArrayNode name = read.putArray("name");
            table.nameParts.forEach(name::add);
            read.put("id", table.id);
            read.put("version", table.version);
            read.set("filters", filters);
        }
    }

    /** The write query of {@code catalog} being planned on this thread, or null. */
    static QueryReads active(LakehouseCatalog catalog) {
        QueryReads active = ACTIVE.get();
        return active != null && active.catalog == catalog ? active : null;
    }

    /** The scans recorded so far, as the control plane's {@code reads}. */
    synchronized ArrayNode json() {
        return reads.deepCopy();
    }

    @Override
    public CatalogPlugin catalog() {
        return catalog;
    }

    @Override
    public boolean registerScans(Scan[] scans) {
        // Spark offers scans of cached data it would reuse instead of planning them:
        // they were not recorded, so the query must plan (and record) its own.
        return false;
    }

    @Override
    public void commit() {
        // The write committed, with these reads checked, in BatchWrite.commit.
    }

    @Override
    public void abort() {
        // Nothing was committed; the write's abort removed its files.
    }

    @Override
    public void close() {
        if (ACTIVE.get() == this) {
            ACTIVE.remove();
        }
    }
}
