package io.lakekv.spark;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.Map;
import java.util.TreeSet;

/** Read and write options: the catalog honours none, so any given is an error naming it (Spark's own excepted). */
final class Options {
    private Options() {
    }

    /**
     * What Spark itself honours and passes along with a streaming write's options
     * ({@code writeStream.option("checkpointLocation", ...)}): not ours to refuse.
     */
    private static final String SPARK_STREAMING_OPTION = "checkpointlocation";

    static void refuseAll(Map<String, String> options, String purpose) {
        if (options == null || options.isEmpty()) {
            return;
        }
        TreeSet<String> names = new TreeSet<>();
        for (String name : options.keySet()) {
            if (!(purpose.equals("write") && name.toLowerCase(java.util.Locale.ROOT).equals(SPARK_STREAMING_OPTION))) {
                names.add(name);
            }
        }
        if (names.isEmpty()) {
            return;
        }
        throw new LakehouseException.InvalidArgument("invalid_argument",
                "lakehouse catalog tables take no " + purpose + " options, got " + String.join(", ", names)
                        + " (time travel: VERSION AS OF / TIMESTAMP AS OF; partition overwrite: INSERT OVERWRITE"
                        + " ... PARTITION or writeTo(...).overwritePartitions(); replaceWhere: writeTo(...).overwrite(condition);"
                        + " nothing was " + (purpose.equals("read") ? "read" : "written") + ")");
    }

    /** Whether a write's options carry Spark's streaming option: the write must then be a stream. */
    static boolean hasStreamingOption(CaseInsensitiveStringMap options) {
        return options != null && options.containsKey(SPARK_STREAMING_OPTION);
    }

    /** The refusal of a batch write given a streaming-only option. */
    static RuntimeException streamingOptionOnBatch(String table) {
        return new LakehouseException.InvalidArgument("invalid_argument", "option checkpointLocation is for a"
                + " streaming write (writeStream); a batch write into " + table + " takes no options; nothing was written");
    }

    static void refuseAll(CaseInsensitiveStringMap options, String purpose) {
        refuseAll(options.asCaseSensitiveMap(), purpose);
    }
}
