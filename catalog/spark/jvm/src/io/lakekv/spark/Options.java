package io.lakekv.spark;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Map;
import java.util.TreeSet;

/** Read and write options: the catalog honours none, so any given is an error naming it. */
final class Options {
    private Options() {
    }

    static void refuseAll(Map<String, String> options, String purpose) {
        if (options == null || options.isEmpty()) {
            return;
        }
        TreeSet<String> names = new TreeSet<>(options.keySet());
        throw new LakehouseException.InvalidArgument("invalid_argument",
                "lakehouse catalog tables take no " + purpose + " options, got " + String.join(", ", names)
                        + " (time travel: VERSION AS OF / TIMESTAMP AS OF; partition overwrite: INSERT OVERWRITE"
                        + " ... PARTITION or writeTo(...).overwritePartitions(); replaceWhere: writeTo(...).overwrite(condition);"
                        + " nothing was " + (purpose.equals("read") ? "read" : "written") + ")");
    }

    static void refuseAll(CaseInsensitiveStringMap options, String purpose) {
        refuseAll(options.asCaseSensitiveMap(), purpose);
    }
}
