package io.lakekv.spark;

import static io.lakekv.spark.Checks.check;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Unit tests of {@link ScanPlans} against a control plane that answers
 * {@code plan_scan} with a given number of files and counts its requests:
 * which plans are kept and reused, and which are always asked for. Run by
 * tests/spark/test_plugin_jvm.py ({@code java -cp ... io.lakekv.spark.ScanPlansTest});
 * exit status 1 on a failure.
 */
public final class ScanPlansTest {
    /** Answers every request with a plan of {@link #files} files. */
    static final class CountingControl extends ControlPlane {
        int requests;
        int files = 1;

        @Override
        protected JsonNode exchange(ObjectNode request) {
            requests++;
            ObjectNode answer = JSON.createObjectNode();
            answer.put("ok", true);
            ArrayNode list = answer.putObject("result").putArray("files");
            for (int i = 0; i < files; i++) {
                list.addObject().put("path", "f" + i).put("size", 1).put("rows", 1);
            }
            return answer;
        }

        @Override
        public void close() {
        }
    }

    private static LakehouseTable table(long version, String txn, boolean timeTravel) {
        ObjectNode info = ControlPlane.JSON.createObjectNode();
        info.putArray("name").add("ns").add("t");
        info.put("id", "table-1");
        info.put("version", version);
        info.putObject("schema").put("type", "struct").putArray("fields");
        info.putArray("partitioning");
        info.putObject("properties");
        return new LakehouseTable(null, info, txn, timeTravel);
    }

    private static ArrayNode filter(int value) {
        ArrayNode filters = ControlPlane.JSON.createArrayNode();
        filters.addObject().put("type", "LessThan").put("value", value).putArray("attribute").add("id");
        return filters;
    }

    public static void main(String[] args) {
        CountingControl control = new CountingControl();
        LakehouseTable latest = table(7, null, false);
        long[] later = {0};  // how far past latest's load the test moved the clock
        ScanPlans plans = new ScanPlans(control, () -> latest.loadedAtNanos + later[0]);

        plans.plan(latest, filter(1));
        plans.plan(latest, filter(1));
        check("the same filter at the same version: asked once", control.requests, 1);
        plans.plan(latest, filter(2));
        check("another filter: asked", control.requests, 2);
        plans.plan(table(8, null, false), filter(1));
        check("a newer version: asked", control.requests, 3);
        plans.plan(table(7, null, true), filter(1));
        plans.plan(table(7, null, true), filter(1));
        check("an old version (time travel): asked every time", control.requests, 5);
        plans.plan(table(-1, "txn-1", false), filter(1));
        plans.plan(table(-1, "txn-1", false), filter(1));
        check("inside a durable transaction: asked every time", control.requests, 7);
        later[0] = 2_000_000_000L;
        plans.plan(latest, filter(1));
        check("a table loaded two seconds ago (a DataFrame planned again): asked", control.requests, 8);
        later[0] = 0;
        plans.plan(latest, filter(1));
        check("the answer is kept for a fresh load", control.requests, 8);

        // 64 plans are kept: the 65th new one drops the least recently used.
        plans = new ScanPlans(control, () -> latest.loadedAtNanos);
        control.requests = 0;
        for (int i = 0; i < 65; i++) {
            plans.plan(latest, filter(i));
        }
        plans.plan(latest, filter(64));
        check("the newest plan is kept", control.requests, 65);
        plans.plan(latest, filter(0));
        check("the least recently used one was dropped", control.requests, 66);

        // At most 100,000 files in all; a plan larger than that is not kept.
        plans = new ScanPlans(control, () -> latest.loadedAtNanos);
        control.requests = 0;
        control.files = 60_000;
        plans.plan(latest, filter(1));
        plans.plan(latest, filter(2));
        plans.plan(latest, filter(2));
        check("two large plans: the newer kept", control.requests, 2);
        plans.plan(latest, filter(1));
        check("the older dropped to stay under the file bound", control.requests, 3);
        control.files = 100_001;
        plans.plan(latest, filter(3));
        plans.plan(latest, filter(3));
        check("a plan over the bound is never kept", control.requests, 5);

        Checks.finish();
    }
}
