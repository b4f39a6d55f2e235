"""Apache Iceberg's REST Compatibility Kit (RCK) against ``lakekv serve``.

The kit is the reference implementation's own ``CatalogTests`` and
``ViewCatalogTests`` (iceberg-core's published tests jar) run through
Iceberg's ``RESTCatalog`` client, configured by ``CATALOG_*`` environment
variables to reach a remote server (``RCKUtils``, iceberg-open-api's test
fixtures). ``make iceberg-rck`` fetches the jars from Maven Central into a
cache and compiles lakekv's two entry classes (tests/service/iceberg_rck/src),
which subclass the kit's test classes and state what lakekv claims;
this test starts a server, runs both classes with the JUnit console launcher
and reads its XML report.

Every test passes, or is one of:

* allow-listed in docs/service.md ("Iceberg REST compatibility"), each entry
  naming the spec clause that allows the difference;
* in :data:`KNOWN_FAILING`, with its cause: defects in code other work owns,
  kept here so that the list stays true (a listed test that starts passing
  fails this test, as does any unlisted failure);
* turned off by the kit's own configuration (:data:`OFF_BY_KIT`).

The kit hard-codes its table locations under ``file:/tmp``, so the server's
warehouse is ``file:///tmp``; one run at a time on a machine (a lock), and
the directories a run creates there are removed after it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.testing import ServerProcess

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "tests" / "service" / "iceberg_rck" / "build"
DOCS = REPO / "docs" / "service.md"
CATALOG_TESTS = "org.apache.iceberg.rest.LakekvCatalogTests"
VIEW_TESTS = "org.apache.iceberg.rest.LakekvViewCatalogTests"

# CatalogTests' BASE_TABLE_LOCATION ("file:/tmp"): not the machine's temp dir.
KIT_ROOT = Path("/tmp")
# The top-level namespaces the kit's tests use, hence the directories a run
# may create under KIT_ROOT (table locations are <root>/<namespace>/<table>).
KIT_NAMESPACES = frozenset({
    "a", "ns", "ns1", "ns2", "ns_1", "ns_2", "newdb", "newdb_1", "newdb_2", "other_ns", "parent",
})
LOCK = KIT_ROOT / "lakekv-iceberg-rck.lock"

# The kit's flags, as the RCK README passes them. LakekvCatalogTests states
# the same claims in code; these keep RCKUtils' client properties in step.
KIT_ENV = {
    # lakekv has no implicit namespaces: a table's namespace must exist.
    "CATALOG_RCK_REQUIRES__NAMESPACE__CREATE": "true",
    # A requested location is stored in its one normalized spelling
    # (file:/tmp/ns/tbl -> file:///tmp/ns/tbl; service/iceberg/warehouse.py).
    "CATALOG_RCK_OVERRIDES__REQUESTED__LOCATION": "true",
}

# Tests the kit itself turns off for a REST server: an
# assumption on a capability the entry classes do not claim.
OFF_BY_KIT = frozenset({
    f"{CATALOG_TESTS}.createAndDropEmptyNamespace()",
    f"{CATALOG_TESTS}.listNamespacesWithEmptyNamespace()",
    f"{CATALOG_TESTS}.namespacePropertiesOnEmptyNamespace()",
    f"{CATALOG_TESTS}.testListNestedNamespaces()",
    f"{CATALOG_TESTS}.testDropNamespaceWithNestedNamespace()",
    f"{CATALOG_TESTS}.testNamespaceWithDot()",
    f"{CATALOG_TESTS}.testTableNameWithDot()",
    f"{CATALOG_TESTS}.testNamespaceWithSlash()",
    f"{CATALOG_TESTS}.testTableNameWithSlash()",
    f"{CATALOG_TESTS}.listTablesInEmptyNamespace()",
    f"{VIEW_TESTS}.listViewsInEmptyNamespace()",
})

# Failing for causes in code owned by other work on issue 34; each one passing
# again fails this test until it is taken off the list. Empty: every test the
# kit runs passes or is allow-listed in the docs.
KNOWN_FAILING: dict[str, str] = {}

# AssertJ's wording when only a message check failed (the exception's class matched).
_MESSAGE_ONLY = re.compile(
    r"^\s*(Expecting actual:\s.*\sto start with:|Expecting throwable message:|Expecting message to be:)", re.DOTALL
)


@dataclass(frozen=True)
class Outcome:
    status: str  # passed, failed, skipped
    message: str


def allow_list() -> set[str]:
    """The tests docs/service.md lists under "Differences the spec allows"."""
    page = DOCS.read_text()
    section = page.split("## Iceberg REST compatibility", 1)[1].split("\n## ", 1)[0]
    allowed = section.split("### Differences the spec allows", 1)[1].split("\n### ", 1)[0]
    return {f"org.apache.iceberg.rest.{name}" for name in re.findall(r"`(Lakekv\w*CatalogTests\.[^`]+)`", allowed)}


def show(outcomes: dict[str, Outcome], names: set[str]) -> str:
    return "\n".join(f"  {name}: {outcomes[name].message[:300]!r}" for name in sorted(names))


def kit_classpath() -> str:
    classpath, classes = KIT / "classpath.txt", KIT / "classes"
    if not (classpath.exists() and (classes / ".compiled").exists()):
        pytest.fail("the Iceberg REST Compatibility Kit is not fetched: run `make iceberg-rck` (make test does)")
    jars = classpath.read_text().strip().split(os.pathsep)
    missing = [jar for jar in jars if not Path(jar).exists()]
    if missing:  # the Maven cache was cleared after the classpath was written
        pytest.fail(f"{len(missing)} RCK jars are gone ({missing[0]}): rm -r {KIT} and run `make iceberg-rck`")
    return os.pathsep.join([str(classes), *jars])


@pytest.fixture
def kit_root() -> Iterator[Path]:
    """KIT_ROOT, held for this run alone; the kit's directories it creates there are removed after."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run waits here: both would write /tmp/ns/tbl
        existing = {name for name in KIT_NAMESPACES if (KIT_ROOT / name).exists()}
        try:
            yield KIT_ROOT
        finally:
            for name in sorted(KIT_NAMESPACES - existing):
                if (KIT_ROOT / name).exists():
                    shutil.rmtree(KIT_ROOT / name)


def run_kit(server: ServerProcess, work: Path) -> tuple[dict[str, Outcome], str]:
    """Run both RCK classes against ``server``; each test's outcome by ``<class>.<name>``, and the launcher's output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
    env.update(KIT_ENV, CATALOG_URI=server.url + "/")
    reports = work / "reports"
    command = [
        "java", f"-Djava.io.tmpdir={work}", "-cp", kit_classpath(),
        "org.junit.platform.console.ConsoleLauncher", "execute", "--disable-banner", "--details=summary",
        "--config=rck.local=false",  # the kit would otherwise start its own reference server
        f"--select-class={CATALOG_TESTS}", f"--select-class={VIEW_TESTS}", f"--reports-dir={reports}",
    ]
    # Exit 1 when some test failed: the report says which, and is judged below.
    result = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    report = reports / "TEST-junit-jupiter.xml"
    assert result.returncode in (0, 1) and report.exists(), f"the JUnit launcher failed ({result.returncode}):\n{output[-5000:]}"
    outcomes: dict[str, Outcome] = {}
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        assert name not in outcomes, f"two results for {name}"
        problem = next((case.find(tag) for tag in ("failure", "error", "skipped") if case.find(tag) is not None), None)
        if problem is None:
            outcomes[name] = Outcome("passed", "")
        else:
            status = "skipped" if problem.tag == "skipped" else "failed"
            outcomes[name] = Outcome(status, problem.get("message") or (problem.text or "").strip())
    return outcomes, output


def test_the_iceberg_rest_compatibility_kit_passes_against_lakekv_serve(kit_root: Path, tmp_path: Path) -> None:
    server = ServerProcess(
        str(tmp_path / "lake"), tmp_path / "server.log", extra_args=("--warehouse", kit_root.as_uri()),
    ).start()
    try:
        outcomes, output = run_kit(server, tmp_path)
    finally:
        server.stop()
    summary = "\n".join(line for line in output.splitlines() if re.match(r"\[\s+\d+ (tests|containers) ", line))
    assert re.search(r"\[\s+0 containers failed", summary), f"a test class failed as a whole:\n{output[-5000:]}"

    allowed = allow_list()
    listed = set(KNOWN_FAILING) | allowed
    assert not set(KNOWN_FAILING) & allowed, "a test is both allow-listed in docs and known to fail"
    assert not listed - set(outcomes), f"listed tests the kit does not have: {sorted(listed - set(outcomes))}"
    assert not OFF_BY_KIT - set(outcomes), f"tests the kit does not have: {sorted(OFF_BY_KIT - set(outcomes))}"

    failed = {name for name, outcome in outcomes.items() if outcome.status == "failed"}
    skipped = {name for name, outcome in outcomes.items() if outcome.status == "skipped"}
    passed = set(outcomes) - failed - skipped
    assert skipped == OFF_BY_KIT, (
        f"skipped but not by the kit's configuration:\n{show(outcomes, skipped - OFF_BY_KIT)}\n"
        f"no longer skipped: {sorted(OFF_BY_KIT - skipped)}"
    )
    assert failed <= listed, f"{len(failed - listed)} unexpected RCK failures:\n{show(outcomes, failed - listed)}\n{summary}"
    assert not passed & listed, (
        f"listed as failing but passed (take them off KNOWN_FAILING or the docs allow-list): {sorted(passed & listed)}"
    )
    # Every allowance in the docs today is for the message text alone.
    wider = {name for name in allowed if not _MESSAGE_ONLY.match(outcomes[name].message)}
    assert not wider, f"allow-listed for their message text, but failing on more:\n{show(outcomes, wider)}"
