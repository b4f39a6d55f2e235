// In RCKUtils' package: its client factory is package-private.
package org.apache.iceberg.rest;

import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.view.ViewCatalogTests;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/** Iceberg's reference {@link ViewCatalogTests}, pointed at a running {@code lakekv serve}. */
public class LakekvViewCatalogTests extends ViewCatalogTests<RESTCatalog> {
  private static RESTCatalog client;

  @BeforeAll
  static void connect() {
    client = RCKUtils.initCatalogClient();
  }

  @AfterAll
  static void disconnect() throws Exception {
    client.close();
  }

  @BeforeEach
  void clean() {
    RCKUtils.purgeCatalogTestEntries(client);
  }

  @Override
  protected RESTCatalog catalog() {
    return client;
  }

  /** Tables and views share one catalog (and one namespace of names). */
  @Override
  protected Catalog tableCatalog() {
    return client;
  }

  @Override
  protected boolean requiresNamespaceCreate() {
    return true;
  }

  @Override
  protected boolean supportsServerSideRetry() {
    return true;
  }

  @Override
  protected boolean overridesRequestedLocation() {
    return true;
  }
}
