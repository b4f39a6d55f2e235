package io.lakekv.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.analysis.NamespaceAlreadyExistsException;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.analysis.NoSuchViewException;
import org.apache.spark.sql.catalyst.analysis.NonEmptyNamespaceException;
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException;
import org.apache.spark.sql.catalyst.analysis.ViewAlreadyExistsException;
import org.apache.spark.sql.connector.catalog.CatalogV2Util;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.ProcedureCatalog;
import org.apache.spark.sql.connector.catalog.Relation;
import org.apache.spark.sql.connector.catalog.RelationCatalog;
import org.apache.spark.sql.connector.catalog.StagedTable;
import org.apache.spark.sql.connector.catalog.StagingTableCatalog;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.TransactionalCatalogPlugin;
import org.apache.spark.sql.connector.catalog.transactions.Transaction;
import org.apache.spark.sql.connector.catalog.transactions.TransactionInfo;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.TableInfo;
import org.apache.spark.sql.connector.catalog.TableSummary;
import org.apache.spark.sql.connector.catalog.TableWritePrivilege;
import org.apache.spark.sql.connector.catalog.View;
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure;
import org.apache.spark.sql.connector.expressions.IdentityTransform;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * lakekv as a Spark catalog: {@code spark.sql.catalog.lake=io.lakekv.spark.LakehouseCatalog}.
 *
 * <p>Tables and views share one name space, so it is a {@link RelationCatalog}
 * (Spark's {@code TableCatalog} plus {@code ViewCatalog}): one request resolves a
 * name to whichever it is.
 *
 * <p>Catalog options ({@code spark.sql.catalog.lake.<option>}):
 * <ul>
 *   <li>{@code url}: the lakehouse URL (a directory, {@code file://}, {@code s3://bucket/prefix});</li>
 *   <li>{@code uri} and {@code token}: use a shared {@code lakekv serve} instead of a local control plane;</li>
 *   <li>{@code python}: the Python that has lakekv (default: {@code PYSPARK_PYTHON}, then {@code python3});</li>
 *   <li>storage options {@code endpoint_url}, {@code key}, {@code secret}, {@code session_token},
 *       {@code region}, {@code fsync}, {@code commit_store}: passed to the store, on the driver and
 *       in the tasks of the Python data path, never printed.</li>
 *   <li>{@code transaction}: a durable transaction id, read from the session's conf at
 *       each statement ({@code SET} / {@code RESET} it at any time): every statement then
 *       reads what the transaction staged and stages its writes into it, to become
 *       visible at its commit ({@code CALL <catalog>.system.commit_transaction()},
 *       {@link TransactionProcedures}).</li>
 * </ul>
 * Any other option is an error naming it.
 */
public class LakehouseCatalog
        implements StagingTableCatalog, SupportsNamespaces, RelationCatalog, TransactionalCatalogPlugin, ProcedureCatalog {
    /** {@code transaction} is read at each statement from the session's conf ({@link #sessionTransaction}). */
    private static final Set<String> CATALOG_OPTIONS = Set.of("url", "uri", "token", "python", "transaction");
    /** Catalog option name -> lakekv store option name. */
    private static final Map<String, String> STORAGE_OPTIONS = Map.of(
            "endpoint_url", "endpoint_url",
            "key", "key",
            "secret", "secret",
            "session_token", "token",
            "region", "region",
            "fsync", "fsync",
            "commit_store", "commit_store");

    private String name;
    private ControlPlane control;
    /** Catalog option {@code uri}: the control plane is a shared {@code lakekv serve}. */
    private boolean served;
    /**
     * With {@code uri}: the store root the server reported, when this JVM reaches the same store
     * there ({@link #reachableDataRoot}); else null and data moves through the Python source.
     */
    private String servedDataRoot;
    /** The store options ({@link #STORAGE_OPTIONS}' values): also how this JVM's Hadoop reaches the data ({@link HadoopStorage}). */
    private Map<String, String> storage = Map.of();
    /** Store root -> the Hadoop settings that reach it, or empty where this JVM's Hadoop cannot open it ({@link #hadoopSettings}). */
    private final Map<String, java.util.Optional<Map<String, String>>> reachableRoots = new java.util.concurrent.ConcurrentHashMap<>();
    private PythonSource pythonSource;
    private ScanPlans scanPlans;

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
        Map<String, String> storage = new TreeMap<>();
        for (Map.Entry<String, String> option : options.asCaseSensitiveMap().entrySet()) {
            String key = option.getKey().toLowerCase(java.util.Locale.ROOT);
            if (STORAGE_OPTIONS.containsKey(key)) {
                storage.put(STORAGE_OPTIONS.get(key), option.getValue());
            } else if (!CATALOG_OPTIONS.contains(key)) {
                throw new IllegalArgumentException("unknown option spark.sql.catalog." + name + "." + option.getKey()
                        + "; the lakehouse catalog takes " + String.join(", ", new java.util.TreeSet<>(CATALOG_OPTIONS))
                        + " and the storage options " + String.join(", ", new java.util.TreeSet<>(STORAGE_OPTIONS.keySet())));
            }
        }
        this.storage = Map.copyOf(storage);
        String url = options.get("url");
        String uri = options.get("uri");
        if (uri != null) {
            this.control = new ControlPlane.Http(uri, options.get("token"));
            JsonNode hello = control.call("hello", ControlPlane.args());
            if (url == null) {
                url = hello.path("url").asText(null);
            }
            this.served = true;
            this.servedDataRoot = reachableDataRoot(hello, this.storage);
        } else {
            if (url == null || url.isEmpty()) {
                throw new IllegalArgumentException("spark.sql.catalog." + name + ".url is required: the lakehouse URL");
            }
            if (options.containsKey("token")) {
                throw new IllegalArgumentException("spark.sql.catalog." + name + ".token is for a lakekv serve uri; "
                        + "give the S3 session token as session_token");
            }
            String python = options.getOrDefault("python", defaultPython());
            this.control = new ControlPlane.Child(python, url, storage);
        }
        this.pythonSource = new PythonSource(this, url, storage);
        this.scanPlans = new ScanPlans(control);
        ControlPlane closing = control;
        Runtime.getRuntime().addShutdownHook(new Thread(closing::close, "lakekv-control-close"));
    }

    /**
     * The server's store root ({@code data_root} of its {@code hello}) if this JVM reads the same
     * store there: the identity file {@code _lakekv_store} at that root, opened through Hadoop with
     * the session's settings and the catalog's storage options ({@link HadoopStorage#settings}),
     * holds the server's {@code store_id}. Anything else (no root, a path this machine does not
     * have, another store, storage Hadoop cannot open, such as S3 without hadoop-aws) is null.
     */
    static String reachableDataRoot(JsonNode hello, Map<String, String> storage) {
        String root = hello.path("data_root").asText(null);
        String storeId = hello.path("store_id").asText(null);
        if (root == null || storeId == null) {
            return null;
        }
        org.apache.hadoop.fs.Path identity = new org.apache.hadoop.fs.Path((root.endsWith("/") ? root : root + "/") + "_lakekv_store");
        try {
            org.apache.hadoop.conf.Configuration conf = org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf();
            HadoopStorage.settings(root, storage).forEach(conf::set);
            try (java.io.InputStream in = identity.getFileSystem(conf).open(identity)) {
                return storeId.equals(ControlPlane.JSON.readTree(in).path("store_id").asText(null)) ? root : null;
            }
        } catch (java.io.IOException | RuntimeException e) {
            return null;  // not reachable from here: the Python source reads and writes
        }
    }

    /**
     * Where this JVM reads and writes a table's data files: the {@code data_root} of its
     * description (not null), unless the control plane is a server whose store this JVM does not
     * reach, or this JVM's Hadoop has no file system for it (S3 without hadoop-aws): null then,
     * and the table's data moves through the Python source.
     *
     * @throws IllegalArgumentException another catalog of this JVM reaches the same S3 bucket
     *         with other storage options ({@link HadoopStorage#claim})
     */
    String dataRoot(JsonNode described) {
        String root = described.asText();
        if (served && !root.equals(servedDataRoot)) {
            return null;
        }
        return hadoopSettings(root) != null ? root : null;
    }

    /**
     * The Hadoop settings with which this JVM reaches store root {@code root} (see
     * {@link HadoopStorage}), or null when its Hadoop cannot open it. Every scan and write of
     * the catalog's data files puts them into its Hadoop configuration.
     */
    Map<String, String> hadoopSettings(String root) {
        java.util.Optional<Map<String, String>> known = reachableRoots.get(root);
        if (known == null) {
            org.apache.hadoop.conf.Configuration conf = org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf();
            Map<String, String> settings = null;
            if (HadoopStorage.opens(root, conf)) {
                settings = HadoopStorage.settings(root, storage);
                HadoopStorage.claim(name, root, settings);
            }
            known = java.util.Optional.ofNullable(settings);
            reachableRoots.put(root, known);
        }
        return known.orElse(null);
    }

    private static String defaultPython() {
        for (String variable : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
            String value = System.getenv(variable);
            if (value != null && !value.isEmpty()) {
                return value;
            }
        }
        return "python3";
    }

    @Override
    public String name() {
        return name;
    }

    /**
     * Spark's transaction for one write query into this catalog: records what
     * the query reads, so the write commits serializably ({@link QueryReads}).
     */
    @Override
    public Transaction beginTransaction(TransactionInfo info) {
        return QueryReads.begin(this);
    }

    /**
     * {@code CALL <catalog>.system.begin_transaction()} and its kin ({@link TransactionProcedures}),
     * and the maintenance procedures ({@link MaintenanceProcedures}).
     */
    @Override
    public UnboundProcedure loadProcedure(Identifier ident) {
        UnboundProcedure changes = ChangesProcedure.load(this, ident);  // table_changes
        if (changes != null) {
            return changes;
        }
        UnboundProcedure maintenance = MaintenanceProcedures.load(this, ident);
        return maintenance != null ? maintenance : TransactionProcedures.load(this, ident);
    }

    @Override
    public Identifier[] listProcedures(String[] namespace) {
        return java.util.stream.Stream.of(TransactionProcedures.list(namespace), ChangesProcedure.list(namespace),
                MaintenanceProcedures.list(namespace)).flatMap(Arrays::stream).toArray(Identifier[]::new);
    }

    ControlPlane control() {
        return control;
    }

    ScanPlans scanPlans() {
        return scanPlans;
    }

    PythonSource pythonSource() {
        return pythonSource;
    }

    // -- helpers ---------------------------------------------------------------------

    private static ArrayNode parts(ObjectNode args, String key, String[] namespace, String last) {
        ArrayNode array = args.putArray(key);
        for (String part : namespace) {
            array.add(part);
        }
        if (last != null) {
            array.add(last);
        }
        return array;
    }

    /**
     * The durable transaction this Spark session works in
     * ({@code SET spark.sql.catalog.<name>.transaction=<id>}), or null. Read
     * at each request, so {@code SET} and {@code RESET} take effect at the next
     * statement; a table keeps the transaction it was loaded in.
     */
    String sessionTransaction() {
        String value = SQLConf.get().getConfString(transactionKey(), "").trim();
        return value.isEmpty() ? null : value;
    }

    String transactionKey() {
        return "spark.sql.catalog." + name + ".transaction";
    }

    /** Arguments of a request about the catalog's state: inside the session's transaction, if it has one. */
    private ObjectNode args() {
        ObjectNode args = ControlPlane.args();
        String txn = sessionTransaction();
        if (txn != null) {
            args.put("txn", txn);
        }
        return args;
    }

    private static String txnOf(ObjectNode args) {
        JsonNode txn = args.get("txn");
        return txn == null ? null : txn.asText();
    }

    private ObjectNode nameArgs(Identifier ident) {
        ObjectNode args = args();
        parts(args, "name", ident.namespace(), ident.name());
        return args;
    }

    private ObjectNode namespaceArgs(String[] namespace) {
        ObjectNode args = args();
        parts(args, "namespace", namespace, null);
        return args;
    }

    private static String[][] namespaces(JsonNode result) {
        String[][] out = new String[result.size()][];
        for (int i = 0; i < result.size(); i++) {
            out[i] = ControlPlane.JSON.convertValue(result.get(i), String[].class);
        }
        return out;
    }

    private static Identifier[] identifiers(JsonNode result) {
        Identifier[] out = new Identifier[result.size()];
        for (int i = 0; i < result.size(); i++) {
            String[] name = ControlPlane.JSON.convertValue(result.get(i), String[].class);
            out[i] = Identifier.of(Arrays.copyOf(name, name.length - 1), name[name.length - 1]);
        }
        return out;
    }

    private static Map<String, String> stringMap(JsonNode node) {
        Map<String, String> map = new LinkedHashMap<>();
        if (node != null) {
            node.fields().forEachRemaining(e -> map.put(e.getKey(), e.getValue().asText()));
        }
        return map;
    }

    private static boolean is(RuntimeException e, String kind) {
        return e instanceof CatalogFailure failure && failure.kind().equals(kind);
    }

    // -- namespaces ------------------------------------------------------------------

    @Override
    public String[][] listNamespaces() {
        return namespaces(control.call("list_namespaces", args()));
    }

    @Override
    public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
        ObjectNode args = args();
        parts(args, "parent", namespace, null);
        try {
            return namespaces(control.call("list_namespaces", args));
        } catch (RuntimeException e) {
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(namespace);
            }
            throw e;
        }
    }

    @Override
    public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
        try {
            return stringMap(control.call("load_namespace", namespaceArgs(namespace)));
        } catch (RuntimeException e) {
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(namespace);
            }
            throw e;
        }
    }

    @Override
    public void createNamespace(String[] namespace, Map<String, String> metadata) throws NamespaceAlreadyExistsException {
        ObjectNode args = namespaceArgs(namespace);
        ObjectNode properties = args.putObject("properties");
        metadata.forEach(properties::put);
        try {
            control.call("create_namespace", args);
        } catch (RuntimeException e) {
            if (is(e, "namespace_exists")) {
                throw new NamespaceAlreadyExistsException(namespace);
            }
            throw e;
        }
    }

    @Override
    public void alterNamespace(String[] namespace, NamespaceChange... changes) throws NoSuchNamespaceException {
        ObjectNode args = namespaceArgs(namespace);
        ObjectNode set = args.putObject("set");
        ArrayNode remove = args.putArray("remove");
        for (NamespaceChange change : changes) {
            if (change instanceof NamespaceChange.SetProperty p) {
                set.put(p.property(), p.value());
            } else if (change instanceof NamespaceChange.RemoveProperty p) {
                remove.add(p.property());
            } else {
                throw new UnsupportedOperationException("namespace change " + change + " is not supported");
            }
        }
        try {
            control.call("alter_namespace", args);
        } catch (RuntimeException e) {
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(namespace);
            }
            throw e;
        }
    }

    @Override
    public boolean dropNamespace(String[] namespace, boolean cascade) throws NoSuchNamespaceException, NonEmptyNamespaceException {
        ObjectNode args = namespaceArgs(namespace);
        args.put("cascade", cascade);
        try {
            return control.call("drop_namespace", args).asBoolean();
        } catch (RuntimeException e) {
            if (is(e, "namespace_not_empty")) {
                throw new NonEmptyNamespaceException(namespace);
            }
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(namespace);
            }
            throw e;
        }
    }

    // -- tables ----------------------------------------------------------------------

    /**
     * {@code SHOW TABLES}: the names only. Spark's default loads every table for its type, so one
     * table that cannot be loaded (its Iceberg metadata unreadable, say) would fail the listing of
     * its whole namespace; the type is the default's for a table without {@code table_type}.
     */
    @Override
    public TableSummary[] listTableSummaries(String[] namespace) throws NoSuchNamespaceException {
        Identifier[] tables = listTables(namespace);
        TableSummary[] summaries = new TableSummary[tables.length];
        for (int i = 0; i < tables.length; i++) {
            summaries[i] = TableSummary.of(tables[i], TableSummary.FOREIGN_TABLE_TYPE);
        }
        return summaries;
    }

    @Override
    public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
        try {
            return identifiers(control.call("list_tables", namespaceArgs(namespace)));
        } catch (RuntimeException e) {
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(namespace);
            }
            throw e;
        }
    }

    private Table load(Identifier ident, ObjectNode args) throws NoSuchTableException {
        try {
            boolean timeTravel = args.has("version") || args.has("timestamp_us");
            if (timeTravel) {
                args.remove("txn");  // a past version is the same inside a transaction
            }
            return new LakehouseTable(this, control.call("load_table", args), txnOf(args), timeTravel);
        } catch (RuntimeException e) {
            // A table that exists but not at the version asked ("not_at_version") is not Spark's
            // TABLE_OR_VIEW_NOT_FOUND: the catalog's error, naming both versions, goes through.
            if (is(e, "no_such_table") || is(e, "no_such_namespace")) {
                return metadataTable(ident, args);
            }
            throw e;
        }
    }

    /**
     * The table a write (INSERT, DELETE, UPDATE, MERGE, a stream) goes into. A view of that
     * name is Spark's {@code VIEW_WRITE_NOT_ALLOWED}, not a missing table.
     */
    @Override
    public Table loadTable(Identifier ident, Set<TableWritePrivilege> privileges) throws NoSuchTableException {
        try {
            return loadTable(ident);
        } catch (NoSuchTableException e) {
            if (ident.namespace().length > 0 && viewExists(ident)) {
                List<String> parts = list(name);
                parts.addAll(Arrays.asList(ident.namespace()));
                parts.add(ident.name());
                String quoted = org.apache.spark.sql.catalyst.util.QuotingUtils.quoteNameParts(
                        scala.jdk.javaapi.CollectionConverters.asScala(parts).toSeq());
                // Spark's own error for a write into a view; checked in Java, so thrown unchecked.
                throw LakehouseCatalog.<RuntimeException>unchecked(new AnalysisException("VIEW_WRITE_NOT_ALLOWED",
                        scala.collection.immutable.Map$.MODULE$.from(
                                scala.jdk.javaapi.CollectionConverters.asScala(Map.of("name", quoted)))));
            }
            throw e;
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E unchecked(Throwable e) throws E {
        throw (E) e;
    }

    /**
     * Whether a table of that name exists; a metadata table ({@link MetadataTables}) does not
     * count, so {@code CREATE TABLE lake.system.history} makes a real table, which then wins.
     */
    @Override
    public boolean tableExists(Identifier ident) {
        if (ident.namespace().length == 0) {
            return false;
        }
        try {
            control.call("load_table", nameArgs(ident));
            return true;
        } catch (RuntimeException e) {
            if (is(e, "no_such_table") || is(e, "no_such_namespace")) {
                return false;
            }
            throw e;
        }
    }

    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
        if (ident.namespace().length == 0) {
            throw new NoSuchTableException(ident);
        }
        return load(ident, nameArgs(ident));
    }

    @Override
    public Table loadTable(Identifier ident, String version) throws NoSuchTableException {
        long number;
        try {
            number = Long.parseLong(version.trim());
        } catch (NumberFormatException e) {
            throw new LakehouseException.InvalidArgument("invalid_argument",
                    "VERSION AS OF " + version + ": a lakehouse version is a number (see lake.history())");
        }
        ObjectNode args = nameArgs(ident);
        args.put("version", number);
        return load(ident, args);
    }

    @Override
    public Table loadTable(Identifier ident, long timestampMicros) throws NoSuchTableException {
        ObjectNode args = nameArgs(ident);
        args.put("timestamp_us", timestampMicros);
        return load(ident, args);
    }

    @Override
    public Relation loadRelation(Identifier ident) throws NoSuchTableException {
        if (ident.namespace().length == 0) {
            throw new NoSuchTableException(ident);
        }
        JsonNode relation;
        ObjectNode args = nameArgs(ident);
        try {
            relation = control.call("load_relation", args);
        } catch (RuntimeException e) {
            if (is(e, "no_such_table") || is(e, "no_such_view") || is(e, "no_such_namespace")) {
                return metadataTable(ident, args);
            }
            throw e;
        }
        if (relation.has("view")) {
            return view(ident, relation.get("view"));
        }
        return new LakehouseTable(this, relation.get("table"), txnOf(args));
    }

    /** The metadata table {@code ident} names ({@code ns.t.files}, {@code system.history}: {@link MetadataTables}), else not found. */
    private Table metadataTable(Identifier ident, ObjectNode args) throws NoSuchTableException {
        Table metadata = MetadataTables.load(this, ident, args);
        if (metadata == null) {
            throw new NoSuchTableException(ident);
        }
        return metadata;
    }

    @Override
    public void invalidateTable(Identifier ident) {
        // Nothing cached: every query loads the table again.
    }

    /** The control-plane arguments of a CREATE TABLE, with what Spark allows but we do not honour refused. */
    private ObjectNode createArgs(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties) {
        ObjectNode args = nameArgs(ident);
        for (Column column : columns) {
            if (column.defaultValue() != null) {
                throw new LakehouseException.InvalidArgument("invalid_argument",
                        "column " + column.name() + ": DEFAULT values are not supported by the lakehouse catalog");
            }
            if (column.generationExpression() != null) {
                throw new LakehouseException.InvalidArgument("invalid_argument",
                        "column " + column.name() + ": GENERATED columns are not supported by the lakehouse catalog");
            }
        }
        StructType schema = ColumnTypes.forCreate(CatalogV2Util.v2ColumnsToStructType(columns), properties);
        try {
            args.set("schema", ControlPlane.JSON.readTree(schema.json()));
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
        ArrayNode partitioning = args.putArray("partitioning");
        for (Transform transform : partitions) {
            if (!(transform instanceof IdentityTransform identity) || identity.ref().fieldNames().length != 1) {
                throw new LakehouseException.InvalidArgument("invalid_argument",
                        "PARTITIONED BY " + transform.describe() + ": the lakehouse partitions by columns only");
            }
            partitioning.add(identity.ref().fieldNames()[0]);
        }
        ObjectNode props = args.putObject("properties");
        properties.forEach(props::put);
        return args;
    }

    private Table create(Identifier ident, ObjectNode args) throws TableAlreadyExistsException, NoSuchNamespaceException {
        try {
            return new LakehouseTable(this, control.call("create_table", args), txnOf(args));
        } catch (RuntimeException e) {
            if (is(e, "table_exists") || is(e, "view_exists")) {
                throw new TableAlreadyExistsException(ident);
            }
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(ident.namespace());
            }
            throw e;
        }
    }

    @Override
    public Table createTable(Identifier ident, TableInfo info) throws TableAlreadyExistsException, NoSuchNamespaceException {
        return create(ident, createArgs(ident, info.columns(), info.partitions(), info.properties()));
    }

    @Override
    public Table createTable(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties)
            throws TableAlreadyExistsException, NoSuchNamespaceException {
        return create(ident, createArgs(ident, columns, partitions, properties));
    }

    @Override
    @SuppressWarnings("deprecation")
    public Table createTable(Identifier ident, StructType schema, Transform[] partitions, Map<String, String> properties)
            throws TableAlreadyExistsException, NoSuchNamespaceException {
        return createTable(ident, CatalogV2Util.structTypeToV2Columns(schema, false), partitions, properties);
    }

    @Override
    public Table alterTable(Identifier ident, TableChange... changes) throws NoSuchTableException {
        if (changes.length == 0) {
            return loadTable(ident);  // e.g. ALTER COLUMN ... TYPE to the type it has
        }
        for (TableChange change : changes) {
            ColumnTypes.checkAlter(change);  // before anything is sent: a refused change changes nothing
        }
        ObjectNode args = nameArgs(ident);
        ArrayNode list = args.putArray("changes");
        for (TableChange change : changes) {
            list.add(TableChanges.encode(change));
        }
        try {
            return new LakehouseTable(this, control.call("alter_table", args), txnOf(args));
        } catch (RuntimeException e) {
            if (is(e, "no_such_table")) {
                throw new NoSuchTableException(ident);
            }
            throw e;
        }
    }

    @Override
    public boolean dropTable(Identifier ident) {
        ObjectNode args = nameArgs(ident);
        return control.call("drop_table", args).asBoolean();
    }

    @Override
    public boolean purgeTable(Identifier ident) {
        ObjectNode args = nameArgs(ident);
        args.put("purge", true);
        return control.call("drop_table", args).asBoolean();
    }

    @Override
    public void renameTable(Identifier from, Identifier to) throws NoSuchTableException, TableAlreadyExistsException {
        ObjectNode args = args();
        parts(args, "old", from.namespace(), from.name());
        parts(args, "new", to.namespace(), to.name());
        try {
            control.call("rename_table", args);
        } catch (RuntimeException e) {
            if (is(e, "no_such_table")) {
                throw new NoSuchTableException(from);
            }
            if (is(e, "table_exists") || is(e, "view_exists")) {
                throw new TableAlreadyExistsException(to);
            }
            throw e;
        }
    }

    // -- staged creates: CREATE [OR REPLACE] TABLE ... AS SELECT -------------------------

    private StagedTable stage(Identifier ident, ObjectNode args, boolean replace, boolean mustExist)
            throws TableAlreadyExistsException, NoSuchNamespaceException, NoSuchTableException {
        ObjectNode begin = ControlPlane.args();
        begin.put("title", "spark: create " + String.join(".", ident.namespace()) + "." + ident.name());
        String parent = txnOf(args);
        if (parent != null) {
            begin.put("parent", parent);  // the statement commits into the session's transaction
        }
        // Nothing pings the statement's transaction while Spark's job runs: give it as long as a
        // session's (capped by the store's maximum), not the store's 60 s default.
        begin.put("timeout_s", TransactionProcedures.DEFAULT_TIMEOUT_S);
        String txn = control.call("begin", begin).asText();
        try {
            if (mustExist) {
                loadTable(ident);
            }
            args.put("txn", txn);
            args.put("replace", replace);
            return new LakehouseTable.Staged(this, control.call("create_table", args), txn);
        } catch (RuntimeException | NoSuchTableException e) {
            abortTransaction(txn);
            if (e instanceof RuntimeException le) {
                if (is(le, "table_exists") || is(le, "view_exists")) {
                    throw new TableAlreadyExistsException(ident);
                }
                if (is(le, "no_such_namespace")) {
                    throw new NoSuchNamespaceException(ident.namespace());
                }
                throw le;
            }
            throw (NoSuchTableException) e;
        }
    }

    @Override
    public StagedTable stageCreate(Identifier ident, TableInfo info) throws TableAlreadyExistsException, NoSuchNamespaceException {
        try {
            return stage(ident, createArgs(ident, info.columns(), info.partitions(), info.properties()), false, false);
        } catch (NoSuchTableException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public StagedTable stageCreate(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties)
            throws TableAlreadyExistsException, NoSuchNamespaceException {
        try {
            return stage(ident, createArgs(ident, columns, partitions, properties), false, false);
        } catch (NoSuchTableException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public StagedTable stageReplace(Identifier ident, TableInfo info) throws NoSuchNamespaceException, NoSuchTableException {
        try {
            return stage(ident, createArgs(ident, info.columns(), info.partitions(), info.properties()), true, true);
        } catch (TableAlreadyExistsException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public StagedTable stageReplace(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties)
            throws NoSuchNamespaceException, NoSuchTableException {
        try {
            return stage(ident, createArgs(ident, columns, partitions, properties), true, true);
        } catch (TableAlreadyExistsException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public StagedTable stageCreateOrReplace(Identifier ident, TableInfo info) throws NoSuchNamespaceException {
        try {
            return stage(ident, createArgs(ident, info.columns(), info.partitions(), info.properties()), true, false);
        } catch (TableAlreadyExistsException | NoSuchTableException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public StagedTable stageCreateOrReplace(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties)
            throws NoSuchNamespaceException {
        try {
            return stage(ident, createArgs(ident, columns, partitions, properties), true, false);
        } catch (TableAlreadyExistsException | NoSuchTableException e) {
            throw new IllegalStateException(e);
        }
    }

    void commitTransaction(String txn) {
        ObjectNode args = ControlPlane.args();
        args.put("txn", txn);
        control.call("commit", args);
    }

    void abortTransaction(String txn) {
        ObjectNode args = ControlPlane.args();
        args.put("txn", txn);
        control.call("abort", args);
    }

    // -- views -----------------------------------------------------------------------

    @Override
    public Identifier[] listViews(String[] namespace) throws NoSuchNamespaceException {
        try {
            return identifiers(control.call("list_views", namespaceArgs(namespace)));
        } catch (RuntimeException e) {
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(namespace);
            }
            throw e;
        }
    }

    @Override
    public View loadView(Identifier ident) throws NoSuchViewException {
        if (ident.namespace().length == 0) {
            throw new NoSuchViewException(ident);
        }
        try {
            return view(ident, control.call("load_view", nameArgs(ident)));
        } catch (RuntimeException e) {
            if (is(e, "no_such_view") || is(e, "no_such_namespace")) {
                throw new NoSuchViewException(ident);
            }
            throw e;
        }
    }

    /**
     * The Spark view of the control plane's answer. A view made outside Spark (the Python API,
     * the Iceberg REST API) resolves its names in the catalog and namespace the answer gives,
     * else this catalog and the view's namespace; and when its creator gave no schema, its
     * schema is its query's, analysed here (Spark needs one to bind the view's columns).
     */
    private View view(Identifier ident, JsonNode view) {
        String sql = view.get("sql").asText();
        String catalog = view.path("catalog").isTextual() ? view.get("catalog").asText() : null;
        String[] namespace = ControlPlane.JSON.convertValue(view.get("namespace"), String[].class);
        if (namespace == null || namespace.length == 0) {
            namespace = ident.namespace();
        }
        org.apache.spark.sql.classic.SparkSession spark = org.apache.spark.sql.classic.SparkSession.active();
        if (catalog == null || !spark.sessionState().catalogManager().isCatalogRegistered(catalog)) {
            catalog = name;  // none, or another engine's catalog name (an Iceberg default-catalog): this one
        }
        View.Builder builder = new View.Builder()
                .withQueryText(sql)
                .withCurrentCatalog(catalog)
                .withCurrentNamespace(namespace)
                .withQueryColumnNames(ControlPlane.JSON.convertValue(view.get("query_column_names"), String[].class))
                .withSqlConfigs(stringMap(view.get("sql_configs")));
        if (view.path("schema_mode").isTextual()) {
            builder.withSchemaMode(view.get("schema_mode").asText());
        }
        if (view.path("schema").isObject()) {
            builder.withSchema((StructType) DataType.fromJson(view.get("schema").toString()));
        } else {
            builder.withSchema(analysedSchema(spark, sql, catalog, namespace));
        }
        builder.withProperties(stringMap(view.get("properties")));
        return builder.build();
    }

    /** Serialises {@link #analysedSchema}: it switches the session's current catalog and namespace. */
    private static final Object ANALYSIS_LOCK = new Object();

    /**
     * The output schema of a view's query, analysed in {@code spark} as Spark resolves a view:
     * single and two-part names in {@code catalog} and {@code namespace}. Spark analyses a
     * query against the session's current catalog and namespace, so they are switched for the
     * analysis and put back after it (a query another thread analyses at that instant in the
     * same session could resolve its unqualified names there: views made outside Spark with
     * no schema are the only ones that take this path).
     */
    private static StructType analysedSchema(
            org.apache.spark.sql.classic.SparkSession spark, String sql, String catalog, String[] namespace) {
        org.apache.spark.sql.connector.catalog.CatalogManager manager = spark.sessionState().catalogManager();
        synchronized (ANALYSIS_LOCK) {
            String savedCatalog = manager.currentCatalog().name();
            String[] savedNamespace = manager.currentNamespace();
            try {
                // Parsed as a query, then only analysed: a view whose text is a
                // command (DROP TABLE ...) fails to parse and never runs.
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan;
                try {
                    plan = spark.sessionState().sqlParser().parseQuery(sql);
                } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
                    throw new IllegalArgumentException("the view's SQL is not a query: " + e.getMessage(), e);
                }
                manager.setCurrentCatalog(catalog);
                manager.setCurrentNamespace(namespace);
                return org.apache.spark.sql.classic.Dataset.ofRows(spark, plan).schema();
            } finally {
                manager.setCurrentCatalog(savedCatalog);
                manager.setCurrentNamespace(savedNamespace);
            }
        }
    }

    private View putView(Identifier ident, View view, boolean replace) {
        ObjectNode args = nameArgs(ident);
        args.put("sql", view.queryText());
        args.put("catalog", view.currentCatalog());
        parts(args, "namespace", view.currentNamespace() == null ? new String[0] : view.currentNamespace(), null);
        parts(args, "query_column_names", view.queryColumnNames() == null ? new String[0] : view.queryColumnNames(), null);
        ObjectNode configs = args.putObject("sql_configs");
        if (view.sqlConfigs() != null) {
            view.sqlConfigs().forEach(configs::put);
        }
        args.put("schema_mode", view.schemaMode());
        try {
            args.set("schema", ControlPlane.JSON.readTree(view.schema().json()));
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
        ObjectNode props = args.putObject("properties");
        if (view.properties() != null) {
            view.properties().forEach(props::put);
        }
        args.put("replace", replace);
        control.call("create_view", args);
        return view;
    }

    @Override
    public View createView(Identifier ident, View view) throws ViewAlreadyExistsException, NoSuchNamespaceException {
        try {
            return putView(ident, view, false);
        } catch (RuntimeException e) {
            if (is(e, "view_exists") || is(e, "table_exists")) {
                throw new ViewAlreadyExistsException(ident);
            }
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(ident.namespace());
            }
            throw e;
        }
    }

    @Override
    public View replaceView(Identifier ident, View view) throws NoSuchViewException {
        if (!viewExists(ident)) {
            throw new NoSuchViewException(ident);
        }
        return putView(ident, view, true);
    }

    @Override
    public View createOrReplaceView(Identifier ident, View view) throws ViewAlreadyExistsException, NoSuchNamespaceException {
        try {
            return putView(ident, view, true);
        } catch (RuntimeException e) {
            if (is(e, "table_exists")) {
                throw new ViewAlreadyExistsException(ident);
            }
            if (is(e, "no_such_namespace")) {
                throw new NoSuchNamespaceException(ident.namespace());
            }
            throw e;
        }
    }

    @Override
    public boolean dropView(Identifier ident) {
        return control.call("drop_view", nameArgs(ident)).asBoolean();
    }

    @Override
    public void renameView(Identifier from, Identifier to) throws NoSuchViewException, ViewAlreadyExistsException {
        ObjectNode args = args();
        parts(args, "old", from.namespace(), from.name());
        parts(args, "new", to.namespace(), to.name());
        try {
            control.call("rename_view", args);
        } catch (RuntimeException e) {
            if (is(e, "no_such_view")) {
                throw new NoSuchViewException(from);
            }
            if (is(e, "view_exists") || is(e, "table_exists")) {
                throw new ViewAlreadyExistsException(to);
            }
            throw e;
        }
    }

    static List<String> list(String... parts) {
        return new ArrayList<>(Arrays.asList(parts));
    }
}
