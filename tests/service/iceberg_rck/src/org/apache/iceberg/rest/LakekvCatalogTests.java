// In RCKUtils' package: its client factory is package-private.
package org.apache.iceberg.rest;

import java.util.Map;
import org.apache.iceberg.catalog.CatalogTests;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/**
 * Iceberg's reference {@link CatalogTests}, pointed at a running {@code lakekv serve}.
 *
 * <p>The client comes from {@link RCKUtils} (iceberg-open-api's published test fixtures), which
 * reads the server's address from the {@code CATALOG_*} environment variables the pytest driver
 * sets. What lakekv claims about itself is written here rather than passed in, so the claims sit
 * beside the tests they switch on or off.
 */
public class LakekvCatalogTests extends CatalogTests<RESTCatalog> {
  private static RESTCatalog client;

  @BeforeAll
  static void connect() {
    client = RCKUtils.initCatalogClient();
  }

  @AfterAll
  static void disconnect() throws Exception {
    client.close();
  }

  /** Each test starts from a catalog holding none of the kit's namespaces, tables or views. */
  @BeforeEach
  void clean() {
    RCKUtils.purgeCatalogTestEntries(client);
  }

  @Override
  protected RESTCatalog catalog() {
    return client;
  }

  @Override
  protected RESTCatalog initCatalog(String catalogName, Map<String, String> properties) {
    return RCKUtils.initCatalogClient(properties);
  }

  /** lakekv has no implicit namespaces: a table's namespace must be created first. */
  @Override
  protected boolean requiresNamespaceCreate() {
    return true;
  }

  /** A lost commit race is re-applied on the winner's state before answering 409. */
  @Override
  protected boolean supportsServerSideRetry() {
    return true;
  }

  /** A requested location is stored in one normalized spelling (file:/tmp/x -> file:///tmp/x). */
  @Override
  protected boolean overridesRequestedLocation() {
    return true;
  }

  /** Catalog names may not contain '.' (a namespace path separator in lakekv's keys). */
  @Override
  protected boolean supportsNamesWithDot() {
    return false;
  }

  /** Names may not contain '/' (refused by name validation: DESIGN.md section 7). */
  @Override
  protected boolean supportsNamesWithSlashes() {
    return false;
  }
}
