package io.lakekv.spark;

/** What every error answer of the control plane carries: its kind ({@code no_such_table}, {@code catalog}, ...). */
interface CatalogFailure {
    String kind();
}
