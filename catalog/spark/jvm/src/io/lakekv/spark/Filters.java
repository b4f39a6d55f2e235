package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.internal.connector.PredicateUtils;
import org.apache.spark.sql.sources.AlwaysFalse;
import org.apache.spark.sql.sources.AlwaysTrue;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringStartsWith;

import java.math.BigDecimal;
import java.sql.Date;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;

/**
 * Pushed filters in the JSON form the control plane prunes files with
 * (catalog/spark/conditions.py {@code spark_filters}).
 *
 * <p>Only pruning uses them: Spark re-applies every filter to the rows, so a
 * filter that cannot be encoded is simply left out (it prunes nothing).
 * Conjunctions arrive already split; {@code Or}/{@code Not} are left out.
 */
final class Filters {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private Filters() {
    }

    static ArrayNode encode(Filter[] filters) {
        ArrayNode out = NODES.arrayNode();
        for (Filter filter : filters) {
            ObjectNode encoded = encode(filter);
            if (encoded != null) {
                out.add(encoded);
            }
        }
        return out;
    }

    /**
     * A DELETE condition as JSON trees (And/Or/Not kept), or null when any
     * part has no JSON form: a delete must not drop a part, as pruning may.
     */
    static ArrayNode encodeConditions(Filter[] filters) {
        ArrayNode out = NODES.arrayNode();
        for (Filter filter : filters) {
            ObjectNode encoded = encodeCondition(filter);
            if (encoded == null) {
                return null;
            }
            out.add(encoded);
        }
        return out.isEmpty() ? null : out;
    }

    /**
     * A DELETE or overwrite condition (Spark's V2 predicates) as V1 filters, each
     * whole, or null when any part has no V1 form.
     *
     * <p>Not Spark's {@code PredicateUtils.toV1}: for {@code a OR b} it answers
     * {@code a} alone when {@code b} has no V1 form (a boolean {@code IN}, whose
     * values are {@code ALWAYS_TRUE}/{@code ALWAYS_FALSE}), even under {@code NOT};
     * right for pruning a scan at best, but a delete of {@code c IS NULL OR c IN
     * (false, true)} then removed only the null rows, and one of {@code NOT (...)}
     * every other row. Here the connectives are taken apart first and only
     * leaves, which convert whole or not at all, go through {@code toV1}.
     */
    static Filter[] exactV1(Predicate[] predicates) {
        Filter[] out = new Filter[predicates.length];
        for (int i = 0; i < predicates.length; i++) {
            out[i] = exactV1(predicates[i]);
            if (out[i] == null) {
                return null;
            }
        }
        return out;
    }

    private static Filter exactV1(Predicate predicate) {
        org.apache.spark.sql.connector.expressions.Expression[] children = predicate.children();
        switch (predicate.name()) {
            case "AND", "OR" -> {
                if (children.length != 2 || !(children[0] instanceof Predicate l) || !(children[1] instanceof Predicate r)) {
                    return null;
                }
                Filter left = exactV1(l);
                Filter right = exactV1(r);
                if (left == null || right == null) {
                    return null;
                }
                return predicate.name().equals("AND") ? new And(left, right) : new Or(left, right);
            }
            case "NOT" -> {
                if (children.length != 1 || !(children[0] instanceof Predicate c)) {
                    return null;
                }
                Filter child = exactV1(c);
                return child == null ? null : new Not(child);
            }
            case "ALWAYS_TRUE" -> {
                return new AlwaysTrue();
            }
            case "ALWAYS_FALSE" -> {
                return new AlwaysFalse();
            }
            default -> {
                for (org.apache.spark.sql.connector.expressions.Expression child : children) {
                    if (child instanceof Predicate) {
                        return null;  // a leaf holding a predicate (IN (true, false)): toV1 could drop it
                    }
                }
                scala.Option<Filter> v1 = PredicateUtils.toV1(predicate);
                return v1.isDefined() ? v1.get() : null;
            }
        }
    }

    private static ObjectNode encodeCondition(Filter filter) {
        if (filter instanceof AlwaysTrue || filter instanceof AlwaysFalse) {
            return NODES.objectNode().put("type", filter instanceof AlwaysTrue ? "AlwaysTrue" : "AlwaysFalse");
        }
        if (filter instanceof Not f) {
            ObjectNode child = encodeCondition(f.child());
            return child == null ? null : (ObjectNode) NODES.objectNode().put("type", "Not").set("child", child);
        }
        if (filter instanceof And f) {
            return binary("And", f.left(), f.right());
        }
        if (filter instanceof Or f) {
            return binary("Or", f.left(), f.right());
        }
        return encode(filter);
    }

    private static ObjectNode binary(String type, Filter left, Filter right) {
        ObjectNode l = encodeCondition(left);
        ObjectNode r = encodeCondition(right);
        if (l == null || r == null) {
            return null;
        }
        ObjectNode node = NODES.objectNode().put("type", type);
        node.set("left", l);
        node.set("right", r);
        return node;
    }

    /** One filter as JSON, or null when it has no JSON form. */
    static ObjectNode encode(Filter filter) {
        if (filter instanceof IsNull f) {
            return leaf("IsNull", f.attribute());
        }
        if (filter instanceof IsNotNull f) {
            return leaf("IsNotNull", f.attribute());
        }
        if (filter instanceof In f) {
            ArrayNode values = NODES.arrayNode();
            for (Object value : f.values()) {
                JsonNode v = literal(value);
                if (v == null) {
                    return null;
                }
                values.add(v);
            }
            ObjectNode node = leaf("In", f.attribute());
            node.set("values", values);
            return node;
        }
        String type;
        String attribute;
        Object value;
        if (filter instanceof EqualTo f) {
            type = "EqualTo"; attribute = f.attribute(); value = f.value();
        } else if (filter instanceof EqualNullSafe f) {
            type = "EqualNullSafe"; attribute = f.attribute(); value = f.value();
        } else if (filter instanceof GreaterThan f) {
            type = "GreaterThan"; attribute = f.attribute(); value = f.value();
        } else if (filter instanceof GreaterThanOrEqual f) {
            type = "GreaterThanOrEqual"; attribute = f.attribute(); value = f.value();
        } else if (filter instanceof LessThan f) {
            type = "LessThan"; attribute = f.attribute(); value = f.value();
        } else if (filter instanceof LessThanOrEqual f) {
            type = "LessThanOrEqual"; attribute = f.attribute(); value = f.value();
        } else if (filter instanceof StringStartsWith f) {
            type = "StringStartsWith"; attribute = f.attribute(); value = f.value();
        } else {
            return null;
        }
        JsonNode v = literal(value);
        if (v == null) {
            return null;
        }
        ObjectNode node = leaf(type, attribute);
        node.set("value", v);
        return node;
    }

    private static ObjectNode leaf(String type, String attribute) {
        ObjectNode node = NODES.objectNode();
        node.put("type", type);
        ArrayNode parts = node.putArray("attribute");
        for (String part : splitAttribute(attribute)) {
            parts.add(part);
        }
        return node;
    }

    /** A V1 filter attribute is dotted, with backquotes around parts that contain dots. */
    static List<String> splitAttribute(String attribute) {
        List<String> parts = new ArrayList<>();
        StringBuilder part = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < attribute.length(); i++) {
            char c = attribute.charAt(i);
            if (c == '`') {
                if (quoted && i + 1 < attribute.length() && attribute.charAt(i + 1) == '`') {
                    part.append('`');
                    i++;
                } else {
                    quoted = !quoted;
                }
            } else if (c == '.' && !quoted) {
                parts.add(part.toString());
                part.setLength(0);
            } else {
                part.append(c);
            }
        }
        parts.add(part.toString());
        return parts;
    }

    // The control plane reads dates and times as Python's datetime, which holds
    // the years 1 to 9999 (as Spark's own literals do); a literal outside has
    // no JSON form, so its filter prunes nothing (and a DELETE with it is
    // rewritten by Spark rather than done by the catalog).
    private static final LocalDate MIN_DATE = LocalDate.of(1, 1, 1);
    private static final LocalDate MAX_DATE = LocalDate.of(9999, 12, 31);
    private static final long MIN_MICROS = -62_135_596_800_000_000L;  // 0001-01-01T00:00:00Z
    private static final long MAX_MICROS = 253_402_300_799_999_999L;  // 9999-12-31T23:59:59.999999Z

    /**
     * A literal as JSON; null when the control plane could not read it exactly
     * (a type it does not know, NaN or an infinity, a date or time outside the
     * years 1 to 9999, a time finer than microseconds).
     */
    static JsonNode literal(Object value) {
        if (value == null) {
            return NODES.nullNode();
        }
        if (value instanceof Boolean b) {
            return NODES.booleanNode(b);
        }
        if (value instanceof Byte || value instanceof Short || value instanceof Integer || value instanceof Long) {
            return NODES.numberNode(((Number) value).longValue());
        }
        if (value instanceof Float || value instanceof Double) {
            // JSON has no NaN or infinity (Jackson would write the string "NaN").
            double d = ((Number) value).doubleValue();
            return Double.isFinite(d) ? NODES.numberNode(d) : null;
        }
        if (value instanceof String s) {
            return NODES.textNode(s);
        }
        if (value instanceof BigDecimal d) {
            return NODES.objectNode().put("decimal", d.toPlainString());
        }
        if (value instanceof LocalDate d) {
            return date(d);
        }
        if (value instanceof Date d) {
            // Spark made the Date in the hybrid Julian calendar; its own inverse gives the day back.
            return date(LocalDate.ofEpochDay(DateTimeUtils.fromJavaDate(d)));
        }
        if (value instanceof Instant t) {
            return timestamp(instantMicros(t));
        }
        if (value instanceof Timestamp t) {
            // Not t.toInstant(): before 1582 the hybrid calendar's instant is days off Spark's.
            return timestamp(DateTimeUtils.fromJavaTimestamp(t));
        }
        if (value instanceof LocalDateTime t) {
            if (t.getNano() % 1000 != 0 || t.toLocalDate().isBefore(MIN_DATE) || t.toLocalDate().isAfter(MAX_DATE)) {
                return null;
            }
            return NODES.objectNode().put("timestamp_ntz", t.toString());
        }
        return null;
    }

    /** Microseconds since the epoch, exactly (not through nanoseconds, which overflow outside 1677-2262). */
    static Long instantMicros(Instant t) {
        if (t.getNano() % 1000 != 0) {
            return null;
        }
        try {
            return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000L), t.getNano() / 1000);
        } catch (ArithmeticException e) {
            return null;
        }
    }

    private static JsonNode date(LocalDate d) {
        if (d.isBefore(MIN_DATE) || d.isAfter(MAX_DATE)) {
            return null;
        }
        return NODES.objectNode().put("date", d.toString());
    }

    private static JsonNode timestamp(Long micros) {
        if (micros == null || micros < MIN_MICROS || micros > MAX_MICROS) {
            return null;
        }
        return NODES.objectNode().put("timestamp_us", micros);
    }
}
