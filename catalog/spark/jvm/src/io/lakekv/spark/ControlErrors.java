package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The control plane's error answers as exceptions.
 *
 * <p>Inside the catalog methods, kinds such as {@code no_such_table} become
 * Spark's own analysis exceptions (see {@link LakehouseCatalog}); everything
 * else is a {@link LakehouseException} whose message starts with the Python
 * class line ({@code catalog.errors.RetryableConflictError: ...}), so the
 * class name is in Spark's error and {@code catalog.spark.catalog_errors()}
 * rebuilds it in PySpark.
 */
final class ControlErrors {
    private ControlErrors() {
    }

    static RuntimeException toException(JsonNode error) {
        String kind = error.path("kind").asText("internal");
        String text = error.path("text").asText(error.path("message").asText("unknown error"));
        if (kind.equals("invalid_argument") || kind.equals("bad_request")) {
            return new LakehouseException.InvalidArgument(kind, text);
        }
        return new LakehouseException(kind, text);
    }

    /**
     * A data file that is not the file its catalog entry describes, found by the JVM's reader
     * ({@link FileCheck}): the Python reader's {@code catalog.errors.CorruptDataFileError}, with
     * its class line, so the error reads the same whichever reader found it.
     */
    static LakehouseException corruptDataFile(String message) {
        return new LakehouseException("catalog", "catalog.errors.CorruptDataFileError: " + message);
    }
}
