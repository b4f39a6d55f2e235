package io.lakekv.spark;

import static io.lakekv.spark.Checks.check;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

import java.io.IOException;
import java.nio.file.Files;
import java.util.zip.CRC32C;

/**
 * Unit tests of {@link FileCheck} on the local file system: which damage each
 * kind of entry finds, and what its error says. Run by tests/spark/test_plugin_jvm.py
 * ({@code java -cp ... io.lakekv.spark.FileCheckTest}); exit status 1 on a failure.
 */
public final class FileCheckTest {
    private static final Configuration CONF = new Configuration();

    private static long crc(byte[] bytes, int from, int to) {
        CRC32C crc = new CRC32C();
        crc.update(bytes, from, to - from);
        return crc.getValue();
    }

    /** What {@code check.verify} raises for the file holding {@code body}, or "passed". */
    private static String outcome(FileCheck check, java.nio.file.Path file, byte[] body) throws IOException {
        Files.write(file, body);
        try {
            check.verify(new Path(file.toUri()), CONF);
            return "passed";
        } catch (LakehouseException e) {
            return e.kind() + ": " + e.getMessage();
        }
    }

    public static void main(String[] args) throws IOException {
        java.nio.file.Path dir = Files.createTempDirectory("filecheck");
        java.nio.file.Path file = dir.resolve("f.parquet");
        byte[] good = new byte[1000];
        for (int i = 0; i < good.length; i++) {
            good[i] = (byte) (i * 31);
        }
        int footer = 100;
        FileCheck footerOnly = new FileCheck("data/t/f.parquet", "s.t", good.length, footer,
                crc(good, good.length - footer, good.length), -1);
        FileCheck whole = new FileCheck("data/t/f.parquet", "s.t", good.length, -1, -1, crc(good, 0, good.length));
        FileCheck bare = new FileCheck("data/t/f.parquet", "s.t", good.length, -1, -1, -1);

        check("good bytes pass the footer check", outcome(footerOnly, file, good), "passed");
        check("good bytes pass the whole check", outcome(whole, file, good), "passed");
        byte[] footerFlip = good.clone();
        footerFlip[good.length - 37] ^= 0x01;
        check("a footer flip fails the footer check", outcome(footerOnly, file, footerFlip).startsWith(
                "catalog: catalog.errors.CorruptDataFileError: data file data/t/f.parquet of table 's.t' failed its footer"
                        + " checksum (crc32c 0x"), true);
        check("...and the message says which bytes", outcome(footerOnly, file, footerFlip).contains("of its last 100 bytes"), true);
        byte[] pageFlip = good.clone();
        pageFlip[10] ^= 0x01;
        check("a flip before the footer region is the page checksums' to find", outcome(footerOnly, file, pageFlip), "passed");
        check("...but a whole check finds it", outcome(whole, file, pageFlip).startsWith(
                "catalog: catalog.errors.CorruptDataFileError: data file data/t/f.parquet of table 's.t' failed its"
                        + " checksum (crc32c 0x"), true);
        check("an entry without checksums passes a same-size flip", outcome(bare, file, pageFlip), "passed");
        byte[] cut = java.util.Arrays.copyOf(good, 990);
        for (FileCheck each : new FileCheck[] {footerOnly, whole, bare}) {
            check("a truncated file fails on its size", outcome(each, file, cut),
                    "catalog: catalog.errors.CorruptDataFileError: data file data/t/f.parquet of table 's.t' has 990 bytes,"
                            + " its entry says 1000");
        }
        Files.delete(file);
        footerOnly.verify(new Path(file.toUri()), CONF);  // a missing file is Spark's reader's to report
        check("a missing file is left to Spark's reader", "returned", "returned");
        Checks.finish();
    }
}
