package io.lakekv.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;

import java.io.IOException;
import java.net.URI;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How this JVM's Hadoop reaches a catalog's data files: whether it can open
 * the store root the control plane names ({@code data_root}), and the Hadoop
 * settings that take it there.
 *
 * <p>A {@code file:} root needs nothing. An {@code s3a://bucket/prefix} root
 * needs Spark's S3 file system ({@code hadoop-aws} and the AWS SDK, which
 * {@code make install} fetches and {@code catalog.spark.plugin.spark_jars}
 * puts in {@code spark.jars}); without it the plugin reads and writes
 * through the Python source, as for any store Hadoop cannot open. Its
 * endpoint and keys are the catalog's storage options, turned into S3A's
 * per-bucket settings ({@code fs.s3a.bucket.<bucket>.*}) that go into the
 * Hadoop configuration of each scan and write of the catalog only, never
 * into the session's: nothing is set in Hadoop's conf by the user, and
 * another catalog's or the user's own {@code s3a:} reads see none of them.
 *
 * <p>Hadoop keeps one S3 client per bucket in a JVM (its file system
 * cache), made with the settings of the first configuration that opens the
 * bucket. So two catalogs of one JVM that name the same bucket with
 * different storage options are refused ({@link #claim}), rather than one
 * of them silently talking to the other's endpoint with the other's keys.
 */
final class HadoopStorage {
    private static final String S3A = "s3a";
    /** Bucket -> the S3A settings the first catalog that used it in this JVM gave it. */
    private static final Map<String, Map<String, String>> CLAIMED = new ConcurrentHashMap<>();

    private HadoopStorage() {
    }

    /**
     * Whether this JVM's Hadoop has a file system for {@code root}'s scheme ({@code file:} always,
     * {@code s3a:} only with hadoop-aws on the classpath).
     */
    static boolean opens(String root, Configuration conf) {
        String scheme = URI.create(root).getScheme();
        if (scheme == null || scheme.equals("file")) {
            return true;
        }
        try {
            FileSystem.getFileSystemClass(scheme, conf);
            return true;
        } catch (IOException | RuntimeException | LinkageError e) {
            return false;  // no such file system here (no hadoop-aws, or a broken one): the Python source
        }
    }

    /**
     * The Hadoop settings that reach {@code root} with the catalog's store options
     * ({@code endpoint_url}, {@code key}, {@code secret}, {@code token}, {@code region}):
     * S3A's settings of the root's bucket for {@code s3a:}, none for anything else.
     * Options not given are left to S3A's defaults (without both {@code key} and
     * {@code secret}, its credential chain reads the {@code AWS_*} variables, as the
     * Python store does).
     */
    static Map<String, String> settings(String root, Map<String, String> storage) {
        URI uri = URI.create(root);
        if (!S3A.equals(uri.getScheme())) {
            return Map.of();
        }
        String prefix = "fs.s3a.bucket." + uri.getHost() + ".";
        Map<String, String> settings = new TreeMap<>();
        String endpoint = storage.get("endpoint_url");
        if (endpoint != null && !endpoint.isEmpty()) {
            settings.put(prefix + "endpoint", endpoint);
            // Stores other than AWS (SeaweedFS, MinIO) serve buckets by path, not by host name.
            settings.put(prefix + "path.style.access", "true");
        }
        String region = storage.get("region");
        if (region != null && !region.isEmpty()) {
            settings.put(prefix + "endpoint.region", region);
        }
        String key = storage.get("key");
        String secret = storage.get("secret");
        String token = storage.get("token");
        if (key != null && secret != null) {
            settings.put(prefix + "access.key", key);
            settings.put(prefix + "secret.key", secret);
            if (token != null && !token.isEmpty()) {
                settings.put(prefix + "session.token", token);
                settings.put(prefix + "aws.credentials.provider", "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider");
            } else {
                settings.put(prefix + "aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider");
            }
        }
        return Collections.unmodifiableMap(settings);
    }

    /**
     * Records that catalog {@code catalog} reaches {@code root}'s bucket with {@code settings}, in
     * this JVM; the first catalog to use a bucket fixes its settings.
     *
     * @throws IllegalArgumentException another catalog of this JVM uses the bucket with other settings
     */
    static void claim(String catalog, String root, Map<String, String> settings) {
        if (settings.isEmpty()) {
            return;
        }
        String bucket = URI.create(root).getHost();
        Map<String, String> first = CLAIMED.putIfAbsent(bucket, settings);
        if (first != null && !first.equals(settings)) {
            throw new IllegalArgumentException("catalog " + catalog + " reaches S3 bucket " + bucket
                    + " with other storage options (endpoint_url, key, secret, session_token, region) than another"
                    + " catalog of this Spark application: Hadoop keeps one S3 client per bucket in a JVM, so every"
                    + " catalog on a bucket must give the same ones");
        }
    }
}
