package io.lakekv.spark;

import org.apache.spark.QueryContext;
import org.apache.spark.api.python.PythonException;
import scala.Option;
import scala.collection.immutable.Map$;

/**
 * A refusal from the lakehouse catalog (a conflict, a lock, a missing object...).
 *
 * <p>The message is the Python class line and its notes, e.g.
 * {@code catalog.errors.RetryableConflictError: overwrite of 'ns.t': ...}, so the
 * catalog's class name is in Spark's error and {@code catalog.spark.catalog_errors()}
 * rebuilds it in PySpark.
 */
public class LakehouseException extends PythonException implements CatalogFailure {
    private final String kind;

    /**
     * A {@link PythonException}, as it was raised by the catalog's Python
     * control plane: PySpark raises it as its own {@code PythonException}
     * (a {@code PySparkException}) wherever Spark lets it through, such as a
     * write's commit, instead of an unconverted py4j error.
     */
    LakehouseException(String kind, String message) {
        super(message, null, Option.empty(), Map$.MODULE$.empty(), new QueryContext[0]);
        this.kind = kind;
    }

    @Override
    public String kind() {
        return kind;
    }

    /**
     * A request the catalog refused as invalid (bad value, unsupported clause or option):
     * an {@link IllegalArgumentException}, which PySpark raises as its own
     * {@code IllegalArgumentException}.
     */
    public static final class InvalidArgument extends IllegalArgumentException implements CatalogFailure {
        private final String kind;

        InvalidArgument(String kind, String message) {
            super(message);
            this.kind = kind;
        }

        @Override
        public String kind() {
            return kind;
        }
    }
}
