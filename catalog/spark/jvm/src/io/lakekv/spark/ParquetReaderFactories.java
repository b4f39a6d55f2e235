package io.lakekv.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetPartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.parquet.ParquetScan;
import org.apache.spark.sql.types.StructType;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Spark's Parquet reader factories, kept across queries.
 *
 * <p>Making a reader factory broadcasts the scan's whole Hadoop
 * configuration (about 6 ms on the driver, and a fetch per executor). It
 * depends on the settings and the schemas, not on the files or the filters,
 * so a scan whose settings and schemas equal an earlier one's gets that
 * factory with its own filters, and its broadcast is reused. The settings
 * are compared by content: the scan's Hadoop configuration holds every SQL
 * setting the session has set and every storage option, so a changed
 * setting makes a new factory.
 */
final class ParquetReaderFactories {
    /** Enough for the distinct column sets a session's queries read; an evicted factory's broadcast is cleaned by Spark. */
    private static final int KEPT = 32;

    private static SparkContext owner;
    private static final Map<Key, ParquetPartitionReaderFactory> KEPT_FACTORIES = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Key, ParquetPartitionReaderFactory> eldest) {
            return size() > KEPT;
        }
    };

    private ParquetReaderFactories() {
    }

    /** A reader factory for {@code scan}: an earlier one with its filters, or the scan's own. */
    static ParquetPartitionReaderFactory forScan(ParquetScan scan) {
        if (scan.pushedAggregate().isDefined() || scan.pushedVariantExtractions().length > 0) {
            return made(scan);  // rare shapes: not worth a key
        }
        // Read before createReaderFactory adds the read schema to the same configuration.
        Key key = new Key(scan.dataSchema(), scan.readDataSchema(), scan.readPartitionSchema(),
                scan.options().asCaseSensitiveMap(), content(scan.hadoopConf()));
        SparkContext context = scan.sparkSession().sparkContext();
        synchronized (KEPT_FACTORIES) {
            if (owner != context) {  // a new SparkContext: the old broadcasts are gone with the old one
                KEPT_FACTORIES.clear();
                owner = context;
            }
            ParquetPartitionReaderFactory kept = KEPT_FACTORIES.get(key);
            if (kept != null) {
                return kept.copy(scan.conf(), kept.broadcastedConf(), kept.dataSchema(), kept.readDataSchema(),
                        kept.partitionSchema(), scan.pushedFilters(), kept.aggregation(), kept.options());
            }
        }
        ParquetPartitionReaderFactory made = made(scan);
        synchronized (KEPT_FACTORIES) {
            if (owner == context) {
                KEPT_FACTORIES.put(key, made);
            }
        }
        return made;
    }

    /** The scan's own factory: a Parquet scan's is always a ParquetPartitionReaderFactory. */
    private static ParquetPartitionReaderFactory made(ParquetScan scan) {
        return (ParquetPartitionReaderFactory) scan.createReaderFactory();
    }

    private static Map<String, String> content(Configuration conf) {
        Map<String, String> content = new HashMap<>();
        for (Map.Entry<String, String> entry : conf) {
            content.put(entry.getKey(), entry.getValue());
        }
        return content;
    }

    private record Key(StructType dataSchema, StructType readDataSchema, StructType partitionSchema,
                       Map<String, String> options, Map<String, String> settings) {
        Key {
            options = Map.copyOf(options);
        }
    }
}
