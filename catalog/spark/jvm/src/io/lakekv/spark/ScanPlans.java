package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.Iterator;
import java.util.LinkedHashMap;

/**
 * The catalog's scan plans (the files a scan reads), kept per table version
 * and filters.
 *
 * <p>A lakehouse version never changes, so the files a filter keeps at it
 * never do either: a query that repeats at the version its load found
 * latest reuses the plan instead of asking the control plane again. Only
 * plans at the latest version are kept: a later load sees a newer version
 * (and asks), and the files of a latest version are never garbage. Plans
 * inside a durable transaction (whose view has no version) and at an old
 * version (VERSION AS OF, whose files may be expired) are always asked for.
 */
final class ScanPlans {
    /** Enough for the distinct filters of a session's repeated queries... */
    private static final int KEPT_PLANS = 64;
    /** ...as long as they list at most this many files in all (a file's entry is a few hundred bytes). */
    private static final int KEPT_FILES = 100_000;

    private final ControlPlane control;
    /** In access order: the least recently used plan is dropped first. */
    private final LinkedHashMap<String, JsonNode> kept = new LinkedHashMap<>(16, 0.75f, true);
    private int keptFiles;

    ScanPlans(ControlPlane control) {
        this.control = control;
    }

    /** The {@code plan_scan} answer for {@code table} with {@code filters} (encoded by {@link Filters}). */
    JsonNode plan(LakehouseTable table, ArrayNode filters) {
        ObjectNode args = table.versionArgs();
        args.set("filters", filters);
        if (table.txn != null || table.timeTravel) {
            return control.call("plan_scan", args);
        }
        String key = table.id + "@" + table.version + ":" + filters;
        synchronized (kept) {
            JsonNode plan = kept.get(key);
            if (plan != null) {
                return plan;
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
