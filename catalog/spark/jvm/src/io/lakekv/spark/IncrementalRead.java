package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The read options of a lakehouse table: an incremental read and a stream's settings.
 *
 * <ul>
 * <li>{@code start-version} (exclusive) and {@code end-version} (inclusive, default the
 *     version the table was loaded at): a batch read of the rows appended by the commits
 *     after {@code start-version} up to {@code end-version}, as Iceberg's
 *     {@code start-snapshot-id}/{@code end-snapshot-id}. A commit in the range that
 *     deleted or changed rows is refused, naming its version (catalog/changes.py); a
 *     compaction adds nothing. For a stream, {@code start-version} is where it begins
 *     (by default with the whole table as its first micro-batch).</li>
 * <li>Streams only: {@code streaming-skip-delete-versions} and
 *     {@code streaming-skip-overwrite-versions} (booleans, default false) skip such versions
 *     instead of failing, as Iceberg's {@code streaming-skip-*-snapshots}; and
 *     {@code streaming-max-versions-per-micro-batch} (default 1: one micro-batch per committed
 *     version that touched the table).</li>
 * </ul>
 * Any other option is refused, naming it ({@link Options#refuseAll}).
 */
final class IncrementalRead {
    static final String START = "start-version";
    static final String END = "end-version";
    static final String SKIP_DELETE = "streaming-skip-delete-versions";
    static final String SKIP_OVERWRITE = "streaming-skip-overwrite-versions";
    static final String MAX_VERSIONS = "streaming-max-versions-per-micro-batch";

    final Long start;
    final Long end;
    final boolean skipDeletes;
    final boolean skipOverwrites;
    final Integer maxVersions;

    private IncrementalRead(Long start, Long end, boolean skipDeletes, boolean skipOverwrites, Integer maxVersions) {
        this.start = start;
        this.end = end;
        this.skipDeletes = skipDeletes;
        this.skipOverwrites = skipOverwrites;
        this.maxVersions = maxVersions;
    }

    /** The options of a read of {@code table}; any option not listed above is refused. */
    static IncrementalRead parse(LakehouseTable table, CaseInsensitiveStringMap options) {
        Map<String, String> rest = new HashMap<>();
        Map<String, String> ours = new HashMap<>();
        options.asCaseSensitiveMap().forEach((k, v) -> {
            String key = k.toLowerCase(Locale.ROOT);
            if (key.equals(START) || key.equals(END) || key.equals(SKIP_DELETE) || key.equals(SKIP_OVERWRITE)
                    || key.equals(MAX_VERSIONS)) {
                ours.put(key, v);
            } else {
                rest.put(k, v);
            }
        });
        Options.refuseAll(rest, "read");
        Long start = version(ours, START);
        Long end = version(ours, END);
        if (end != null && start == null) {
            throw invalid("option " + END + " needs " + START + " (the version the read starts after)");
        }
        if (start != null && end != null && start > end) {
            throw invalid("option " + START + " (" + start + ") is after " + END + " (" + end
                    + "): the range is (" + START + ", " + END + "]");
        }
        if (start != null && (table.txn != null || table.timeTravel)) {
            throw invalid("an incremental read (" + START + ") reads lakehouse versions: not inside a durable"
                    + " transaction nor with VERSION/TIMESTAMP AS OF");
        }
        Integer max = null;
        if (ours.containsKey(MAX_VERSIONS)) {
            try {
                max = Integer.parseInt(ours.get(MAX_VERSIONS).trim());
            } catch (NumberFormatException e) {
                max = 0;
            }
            if (max < 1) {
                throw invalid("option " + MAX_VERSIONS + " must be a positive number of versions, not '"
                        + ours.get(MAX_VERSIONS) + "'");
            }
        }
        return new IncrementalRead(start, end, bool(ours, SKIP_DELETE), bool(ours, SKIP_OVERWRITE), max);
    }

    private static Long version(Map<String, String> options, String key) {
        String text = options.get(key);
        if (text == null) {
            return null;
        }
        long value;
        try {
            value = Long.parseLong(text.trim());
        } catch (NumberFormatException e) {
            value = -1;
        }
        if (value < 0) {
            throw invalid("option " + key + " must be a lakehouse version (an integer >= 0), not '" + text + "'");
        }
        return value;
    }

    private static boolean bool(Map<String, String> options, String key) {
        String text = options.get(key);
        if (text == null) {
            return false;
        }
        return switch (text.trim().toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw invalid("option " + key + " must be true or false, not '" + text + "'");
        };
    }

    static LakehouseException.InvalidArgument invalid(String message) {
        return new LakehouseException.InvalidArgument("invalid_argument", message + "; nothing was read");
    }

    /** Whether this is a batch read of appended rows (else a plain read, or a stream's settings). */
    boolean incremental() {
        return start != null;
    }

    /** Refuses the streaming-only options in a batch read. */
    void checkBatch() {
        if (skipDeletes || skipOverwrites || maxVersions != null) {
            throw invalid("options " + SKIP_DELETE + ", " + SKIP_OVERWRITE + " and " + MAX_VERSIONS
                    + " are for a stream (readStream)");
        }
    }

    /** Refuses the batch-only option in a stream. */
    void checkStream() {
        if (end != null) {
            throw invalid("option " + END + " is for a batch read: a stream reads every version as it is committed");
        }
    }

    /** The control plane's plan of the files appended to {@code table} in ({@code after}, {@code through}]. */
    JsonNode plan(LakehouseTable table, long after, long through) {
        ObjectNode args = table.requestArgs();
        args.put("start", after);
        args.put("end", through);
        ArrayNode skip = args.putArray("skip");
        if (skipDeletes) {
            skip.add("delete");
        }
        if (skipOverwrites) {
            skip.add("overwrite");
        }
        return table.catalog.control().call("plan_appended", args);
    }
}
