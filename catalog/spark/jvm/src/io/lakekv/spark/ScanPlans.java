package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.function.LongSupplier;

/**
 * The catalog's scan plans (the files a scan reads), kept per table version
 * and filters.
 *
 * <p>A lakehouse version never changes, so the files a filter keeps at it
 * never do either: a query that repeats at the version its load found
 * latest reuses the plan instead of asking the control plane again. A kept
 * plan is given only to a table loaded in the last second, which is a query
 * being planned right after its load: a version that was latest that
 * recently has its files (GC keeps those of every retained version, and
 * deleting them between a plan and its reads fails any query alike). A
 * DataFrame planned again long after its load asks, and gets the control
 * plane's answer for its version (SnapshotTooOldError once it is expired)
 * rather than a list of deleted files. Plans inside a durable transaction
 * (whose view has no version) and at an old version (VERSION AS OF) are
 * never kept.
 */
final class ScanPlans {
    /** Enough for the distinct filters of a session's repeated queries... */
    private static final int KEPT_PLANS = 64;
    /** ...as long as they list at most this many files in all (a file's entry is a few hundred bytes). */
    private static final int KEPT_FILES = 100_000;
    /** How recent a table's load must be for a kept plan. */
    private static final long FRESH_NANOS = 1_000_000_000L;

    private final ControlPlane control;
    private final LongSupplier clock;
    /** In access order: the least recently used plan is dropped first. */
    private final LinkedHashMap<String, JsonNode> kept = new LinkedHashMap<>(16, 0.75f, true);
    private int keptFiles;

    ScanPlans(ControlPlane control) {
        this(control, System::nanoTime);
    }

    /** With {@code clock} in place of {@link System#nanoTime()} (tests move it). */
    ScanPlans(ControlPlane control, LongSupplier clock) {
        this.control = control;
        this.clock = clock;
    }

    /** The {@code plan_scan} answer for {@code table} with {@code filters} (encoded by {@link Filters}). */
    JsonNode plan(LakehouseTable table, ArrayNode filters) {
        ObjectNode args = table.versionArgs();
        args.set("filters", filters);
        if (table.txn != null || table.timeTravel) {
            return control.call("plan_scan", args);
        }
        String key = table.id + "@" + table.version + ":" + filters;
        if (clock.getAsLong() - table.loadedAtNanos < FRESH_NANOS) {
            synchronized (kept) {
                JsonNode plan = kept.get(key);
                if (plan != null) {
                    return plan;
                }
            }
        }
        JsonNode plan = control.call("plan_scan", args);
        int files = plan.path("files").size();
        if (files > KEPT_FILES) {
            return plan;  // too large to keep
        }
        synchronized (kept) {
            JsonNode replaced = kept.put(key, plan);  // another thread may have asked for the same plan
            keptFiles += files - (replaced == null ? 0 : replaced.path("files").size());
            Iterator<JsonNode> eldest = kept.values().iterator();
            while (kept.size() > KEPT_PLANS || keptFiles > KEPT_FILES) {
                keptFiles -= eldest.next().path("files").size();
                eldest.remove();
            }
        }
        return plan;
    }
}
