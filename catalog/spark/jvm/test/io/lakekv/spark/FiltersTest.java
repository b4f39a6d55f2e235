package io.lakekv.spark;

import static io.lakekv.spark.Checks.check;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.FieldReference;
import org.apache.spark.sql.connector.expressions.LiteralValue;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.sources.AlwaysTrue;
import org.apache.spark.sql.types.DataTypes;
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
        // Literals at the edges of their types: exact, or no form at all (they prune nothing).
        check("instant 9999-12-31", Filters.literal(Instant.parse("9999-12-31T00:00:00Z")).toString(),
                "{\"timestamp_us\":253402214400000000}");
        check("instant 1600-01-01", Filters.literal(Instant.parse("1600-01-01T00:00:00Z")).toString(),
                "{\"timestamp_us\":-11676096000000000}");
        check("instant 0001-01-01", Filters.literal(Instant.parse("0001-01-01T00:00:00Z")).toString(),
                "{\"timestamp_us\":-62135596800000000}");
        check("last microsecond", Filters.literal(Instant.parse("9999-12-31T23:59:59.999999Z")).toString(),
                "{\"timestamp_us\":253402300799999999}");
        check("instant past year 9999", Filters.literal(Instant.parse("+10000-01-01T00:00:00Z")), null);
        check("instant before year 1", Filters.literal(Instant.parse("0000-12-31T23:59:59Z")), null);
        check("instant finer than a microsecond", Filters.literal(Instant.ofEpochSecond(0, 1)), null);
        // java.sql.Timestamp and java.sql.Date (Spark's default literals) go through Spark's own
        // DateTimeUtils, which needs Spark's JVM options: tests/spark/test_spark_literal_edges.py.
        for (String day : new String[] {"0001-01-01", "1582-10-04", "1582-10-15", "9999-12-31"}) {
            check("LocalDate " + day, Filters.literal(LocalDate.parse(day)).get("date").asText(), day);
        }
        check("date past year 9999", Filters.literal(LocalDate.of(10000, 1, 1)), null);
        check("date before year 1", Filters.literal(LocalDate.of(0, 12, 31)), null);
        check("ntz year 1", Filters.literal(LocalDateTime.of(1, 1, 1, 0, 0)).toString(),
                "{\"timestamp_ntz\":\"0001-01-01T00:00\"}");
        check("ntz last microsecond", Filters.literal(LocalDateTime.parse("9999-12-31T23:59:59.999999")).toString(),
                "{\"timestamp_ntz\":\"9999-12-31T23:59:59.999999\"}");
        check("ntz past year 9999", Filters.literal(LocalDateTime.of(10000, 1, 1, 0, 0)), null);
        check("NaN has no JSON form", Filters.literal(Double.NaN), null);
        check("float NaN has no JSON form", Filters.literal(Float.NaN), null);
        check("infinity has no JSON form", Filters.literal(Double.POSITIVE_INFINITY), null);
        check("minus infinity has no JSON form", Filters.literal(Float.NEGATIVE_INFINITY), null);
        check("NaN filter is left out", Filters.encode(new EqualTo("f", Double.NaN)), null);
        check("minus zero", Filters.literal(-0.0d).toString(), "-0.0");
        check("long min", Filters.literal(Long.MIN_VALUE).toString(), "-9223372036854775808");
        check("byte min", Filters.literal((byte) -128).toString(), "-128");
        check("decimal of 38 digits", Filters.literal(new BigDecimal("-99999999999999999999999999999999999.999")).toString(),
                "{\"decimal\":\"-99999999999999999999999999999999999.999\"}");
        check("decimal with exponent", Filters.literal(new BigDecimal("1E+37")).get("decimal").asText(),
                "10000000000000000000000000000000000000");
        check("empty string", Filters.literal("").toString(), "\"\"");
        check("non-ASCII string", Filters.literal("\u00e9\ud83d\ude00").asText(), "\u00e9\ud83d\ude00");
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
        // V2 conditions go to V1 whole or not at all (Spark's toV1 drops the half of an OR it cannot convert).
        NamedReference c = FieldReference.apply("c");
        Predicate isNull = new Predicate("IS_NULL", new Expression[] {c});
        Predicate boolIn = new Predicate("IN", new Expression[] {c,
                new org.apache.spark.sql.connector.expressions.filter.AlwaysFalse(),
                new org.apache.spark.sql.connector.expressions.filter.AlwaysTrue()});
        Predicate intIn = new Predicate("IN", new Expression[] {c,
                new LiteralValue<>(1, DataTypes.IntegerType), new LiteralValue<>(2, DataTypes.IntegerType)});
        check("or with a boolean IN has no V1 form",
                Filters.exactV1(new Predicate[] {new org.apache.spark.sql.connector.expressions.filter.Or(isNull, boolIn)}), null);
        check("not of it neither", Filters.exactV1(new Predicate[] {new org.apache.spark.sql.connector.expressions.filter.Not(
                new org.apache.spark.sql.connector.expressions.filter.Or(isNull, boolIn))}), null);
        check("or converts whole", java.util.Arrays.toString(Filters.exactV1(new Predicate[] {
                new org.apache.spark.sql.connector.expressions.filter.Or(isNull, intIn), isNull})),
                "[Or(IsNull(c),In(c, [1,2])), IsNull(c)]");
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
