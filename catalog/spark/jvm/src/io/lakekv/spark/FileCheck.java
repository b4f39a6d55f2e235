package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.util.functional.FutureIO;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.zip.CRC32C;

/**
 * What a data file's catalog entry says of its bytes, checked before Spark's
 * Parquet reader opens the file.
 *
 * <p>Spark's reader reads a file's footer, then only the row groups and
 * pages the query needs, and checks each page against the CRC in its header
 * ({@code parquet.page.verify-checksum.enabled}). Nothing of Parquet's
 * checks the footer or the page indexes, yet the reader skips row groups
 * and pages by the statistics they hold: one damaged max there is a silent
 * wrong answer. So the entry keeps the size and CRC32C of the file's footer
 * region, everything after its last column chunk (page indexes and Bloom
 * filters if any, the footer, its length and magic; see
 * {@code catalog/datafiles.py}), and {@link #verify} compares them with the
 * file before Spark reads it: one stat and one positioned read of those
 * last bytes, which are then in the OS cache for Spark's own footer read.
 * Both go through the same Hadoop file system, path and configuration, and
 * a data file is never rewritten, so they see the same bytes.
 *
 * <p>A file whose entry predates footer checksums is read whole against the
 * whole-file CRC32C instead; one with no checksum at all (written before
 * checksums) is checked by its size only, as the Python reader does.
 * A missing file is left to Spark's reader, which reports it (or skips it
 * under {@code spark.sql.files.ignoreMissingFiles}) as for any table: no
 * byte of it can be read wrong.
 *
 * @param path the store-relative path the entry names (for the message)
 * @param table the table's name, {@code ns.t} (for the message)
 * @param size the file's size in bytes
 * @param footerSize the footer region's size, or -1 if the entry has none
 * @param footerCrc32c the footer region's CRC32C, or -1
 * @param crc32c the whole file's CRC32C, or -1 (only sent when there is no footer checksum)
 */
record FileCheck(String path, String table, long size, long footerSize, long footerCrc32c, long crc32c)
        implements Serializable {
    private static final int BUFFER_BYTES = 1 << 16;

    /** The check of one file of a {@code plan_scan} answer ({@code catalog.spark.control._planned_file}). */
    static FileCheck fromPlan(JsonNode file, String table) {
        return new FileCheck(file.get("path").asText(), table, file.get("size").asLong(),
                file.path("footer_size").asLong(-1), file.path("footer_crc32c").asLong(-1), file.path("crc32c").asLong(-1));
    }

    /**
     * Checks the file at {@code file} (the path Spark reads it by) with Spark's {@code conf}.
     *
     * @throws LakehouseException {@code catalog.errors.CorruptDataFileError} naming the file and the
     *         table: its size or a checksum is not its entry's
     * @throws UncheckedIOException the file could not be read (a storage error)
     */
    void verify(Path file, Configuration conf) {
        try {
            FileSystem fs = file.getFileSystem(conf);
            FileStatus status;
            try {
                status = fs.getFileStatus(file);
            } catch (FileNotFoundException e) {
                return;  // Spark's reader reports it
            }
            long length = status.getLen();
            if (length != size) {
                throw corrupt("has " + length + " bytes, its entry says " + size);
            }
            if (footerSize < 0 && crc32c < 0) {
                return;  // an entry from before checksums: its size is all it says
            }
            // Opened with the status just read: on S3 that spares a second HEAD request.
            try (FSDataInputStream in = FutureIO.awaitFuture(fs.openFile(file).withFileStatus(status).build())) {
                if (footerSize >= 0) {
                    byte[] region = new byte[Math.toIntExact(footerSize)];
                    in.readFully(size - footerSize, region);
                    CRC32C crc = new CRC32C();
                    crc.update(region);
                    if (crc.getValue() != footerCrc32c) {
                        throw corrupt(String.format("failed its footer checksum (crc32c 0x%08x of its last %d bytes,"
                                + " its entry says 0x%08x)", crc.getValue(), footerSize, footerCrc32c));
                    }
                } else {
                    long actual = wholeCrc32c(in);
                    if (actual != crc32c) {
                        throw corrupt(String.format("failed its checksum (crc32c 0x%08x, its entry says 0x%08x)",
                                actual, crc32c));
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("reading data file " + path + " of table '" + table + "' (" + file + "): "
                    + e.getMessage(), e);
        }
    }

    private static long wholeCrc32c(FSDataInputStream in) throws IOException {
        CRC32C crc = new CRC32C();
        byte[] buffer = new byte[BUFFER_BYTES];
        for (int read = in.read(buffer); read >= 0; read = in.read(buffer)) {
            crc.update(buffer, 0, read);
        }
        return crc.getValue();
    }

    /** The Python reader's error for this file (catalog.datafiles.check_body), as the JVM raises it. */
    private LakehouseException corrupt(String what) {
        return ControlErrors.corruptDataFile("data file " + path + " of table '" + table + "' " + what);
    }
}
