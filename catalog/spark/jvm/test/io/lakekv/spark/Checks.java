package io.lakekv.spark;

/**
 * The assertions of the plugin's Java test mains (no JUnit offline): each
 * check prints {@code ok} or {@code FAIL}, and {@link #finish()} exits with
 * status 1 after any failure, else prints {@code all passed}.
 */
final class Checks {
    private static int failures;

    private Checks() {
    }

    static void check(String what, Object actual, Object expected) {
        if (!String.valueOf(actual).equals(String.valueOf(expected))) {
            failures++;
            System.err.println("FAIL " + what + ": expected " + expected + ", got " + actual);
        } else {
            System.out.println("ok   " + what);
        }
    }

    static void finish() {
        if (failures > 0) {
            System.err.println(failures + " failure(s)");
            System.exit(1);
        }
        System.out.println("all passed");
    }
}
