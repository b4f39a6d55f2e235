package io.lakekv.spark;

import static io.lakekv.spark.Checks.check;

import org.apache.hadoop.conf.Configuration;

import java.util.Map;

/**
 * Unit tests of {@link HadoopStorage}: which store roots this JVM's Hadoop opens, and the S3A
 * settings made from a catalog's storage options. Run by tests/spark/test_spark_s3a.py twice:
 * {@code java -cp ... io.lakekv.spark.HadoopStorageTest with-s3a|without-s3a}, with and
 * without hadoop-aws on the classpath; exit status 1 on a failure.
 */
public final class HadoopStorageTest {
    /** "claimed", or the refusal's message. */
    private static String claim(String catalog, String root, Map<String, String> storage) {
        try {
            HadoopStorage.claim(catalog, root, HadoopStorage.settings(root, storage));
            return "claimed";
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
    }

    public static void main(String[] args) {
        boolean s3a = switch (args.length == 1 ? args[0] : "") {
            case "with-s3a" -> true;
            case "without-s3a" -> false;
            default -> throw new IllegalArgumentException("usage: HadoopStorageTest with-s3a|without-s3a");
        };
        Configuration conf = new Configuration();
        check("a file: root opens", HadoopStorage.opens("file:///tmp/lake", conf), true);
        check("an s3a: root opens only with hadoop-aws", HadoopStorage.opens("s3a://bucket/lake", conf), s3a);
        check("a root of a scheme Hadoop has no file system for does not open",
                HadoopStorage.opens("nosuchfs://bucket/lake", conf), false);

        check("a file: root needs no settings", HadoopStorage.settings("file:///tmp/lake", Map.of("key", "k", "secret", "s")), "{}");
        Map<String, String> seaweed = Map.of("endpoint_url", "http://127.0.0.1:8333", "key", "k", "secret", "s", "region", "eu-west-1");
        check("an s3a: root's settings are its bucket's",
                HadoopStorage.settings("s3a://my.bucket/lake", seaweed),
                "{fs.s3a.bucket.my.bucket.access.key=k,"
                        + " fs.s3a.bucket.my.bucket.aws.credentials.provider=org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,"
                        + " fs.s3a.bucket.my.bucket.endpoint=http://127.0.0.1:8333,"
                        + " fs.s3a.bucket.my.bucket.endpoint.region=eu-west-1,"
                        + " fs.s3a.bucket.my.bucket.path.style.access=true,"
                        + " fs.s3a.bucket.my.bucket.secret.key=s}");
        check("a session token takes the temporary-credentials provider",
                HadoopStorage.settings("s3a://b1/lake", Map.of("key", "k", "secret", "s", "token", "t")),
                "{fs.s3a.bucket.b1.access.key=k,"
                        + " fs.s3a.bucket.b1.aws.credentials.provider=org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider,"
                        + " fs.s3a.bucket.b1.secret.key=s, fs.s3a.bucket.b1.session.token=t}");
        check("without keys or endpoint, S3A's defaults (its credential chain, AWS's endpoint)",
                HadoopStorage.settings("s3a://b1/lake", Map.of("fsync", "true")), "{}");

        check("the first catalog on a bucket claims it", claim("one", "s3a://shared/a", seaweed), "claimed");
        check("a catalog with equal settings shares the bucket", claim("two", "s3a://shared/b", seaweed), "claimed");
        String refused = claim("three", "s3a://shared/c", Map.of("endpoint_url", "http://other:9000", "key", "k", "secret", "s"));
        check("a catalog with other settings for a claimed bucket is refused, naming it and the bucket",
                refused.startsWith("catalog three reaches S3 bucket shared with other storage options"), true);
        check("the refusal names no key, secret or endpoint", refused.contains("=s") || refused.contains("other:9000"), false);
        check("another bucket is another claim", claim("three", "s3a://elsewhere/c", Map.of("key", "k2", "secret", "s2")), "claimed");
        Checks.finish();
    }
}
