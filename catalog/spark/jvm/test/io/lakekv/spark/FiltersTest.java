package io.lakekv.spark;

import static io.lakekv.spark.Checks.check;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.sources.AlwaysTrue;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringStartsWith;

import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.List;
import java.util.Map;

/**
 * Unit tests of the plugin's pure pieces (no Spark session): filter encoding,
 * attribute splitting, option refusal. Run by tests/spark/test_plugin_jvm.py
 * ({@code java -cp ... io.lakekv.spark.FiltersTest}); exit status 1 on a failure.
 */
public final class FiltersTest {
    public static void main(String[] args) {
        check("equal-to long", Filters.encode(new EqualTo("a", 5L)),
                "{\"type\":\"EqualTo\",\"attribute\":[\"a\"],\"value\":5}");
        check("greater-than decimal", Filters.encode(new GreaterThan("d", new BigDecimal("1.50"))),
                "{\"type\":\"GreaterThan\",\"attribute\":[\"d\"],\"value\":{\"decimal\":\"1.50\"}}");
        check("date", Filters.encode(new EqualTo("day", LocalDate.of(2024, 2, 29))).get("value"),
                "{\"date\":\"2024-02-29\"}");
        check("instant in microseconds", Filters.encode(new EqualTo("t", Instant.ofEpochSecond(1, 2000))).get("value"),
                "{\"timestamp_us\":1000002}");
        check("timestamp without zone", Filters.encode(new EqualTo("t", LocalDateTime.of(2024, 1, 1, 0, 0))).get("value"),
                "{\"timestamp_ntz\":\"2024-01-01T00:00\"}");
        check("in", Filters.encode(new In("s", new Object[] {"x", "y"})).get("values"), "[\"x\",\"y\"]");
        check("is null", Filters.encode(new IsNull("s")).get("type"), "\"IsNull\"");
        check("starts with", Filters.encode(new StringStartsWith("s", "ab")).get("value"), "\"ab\"");
        // Or/And/Not and unknown literal types are left out: they prune nothing.
        check("and is left out", Filters.encode(new And(new IsNull("a"), new IsNull("b"))), null);
        check("unknown literal is left out", Filters.encode(new EqualTo("a", new int[] {1})), null);
        JsonNode many = Filters.encode(new Filter[] {new IsNull("a"), new EqualTo("a", new Object()), new IsNull("b")});
        check("array keeps what it can", many.size(), 2);
        // A DELETE condition keeps its tree, and is refused whole when any part has no form.
        check("condition tree", Filters.encodeConditions(new Filter[] {
                new Or(new Not(new IsNull("a")), new And(new AlwaysTrue(), new EqualTo("b", 1L)))}),
                "[{\"type\":\"Or\",\"left\":{\"type\":\"Not\",\"child\":{\"type\":\"IsNull\",\"attribute\":[\"a\"]}},"
                + "\"right\":{\"type\":\"And\",\"left\":{\"type\":\"AlwaysTrue\"},"
                + "\"right\":{\"type\":\"EqualTo\",\"attribute\":[\"b\"],\"value\":1}}}]");
        check("condition with a part without form", Filters.encodeConditions(new Filter[] {
                new IsNull("a"), new Or(new IsNull("b"), new EqualTo("c", new Object()))}), null);
        check("empty condition", Filters.encodeConditions(new Filter[0]), null);
        check("quoted attribute", Filters.splitAttribute("`a.b`.c"), List.of("a.b", "c"));
        check("doubled backquote", Filters.splitAttribute("`a``b`"), List.of("a`b"));
        check("plain nested attribute", Filters.splitAttribute("s.x"), List.of("s", "x"));

        try {
            Options.refuseAll(Map.of("replaceWhere", "x = 1"), "write");
            check("replaceWhere is refused", "accepted", "refused");
        } catch (LakehouseException.InvalidArgument e) {
            check("replaceWhere is named", e.getMessage().contains("replaceWhere"), true);
        }
        Options.refuseAll(Map.of(), "read");
        check("no options is fine", true, true);

        Checks.finish();
    }
}
