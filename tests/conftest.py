"""One SparkSession for the whole run (starting one costs seconds), tuned for small tables.

``python3 -m pytest -q`` runs the unit tests and the fast integration tests (the loop to
live with while changing the code); ``--full`` adds the ``slow`` ones (extra JVMs and
processes, kill tests, the wheel, notebooks, simulated days), as CI runs them.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

# The JVMs the tests start (spark-submit jobs, children killed mid-commit, notebook kernels,
# Connect servers) live seconds: compiled by C1 alone they start with half the CPU on two
# cores. The test process's own JVM runs the whole session and keeps C2. Every JVM maps
# the class archive of ``jvm_archive`` when there is one (decision 013).
C1_ONLY = "-XX:TieredStopAtLevel=1"
# Set where this file chose the options, so that the workers of ``-n 2`` (which inherit
# the environment) still tell them from a caller's own.
_OURS = "SBQUEUE_TESTS_CHOSE_JVM_OPTIONS"
_CHILD_OPTS_SET = "SPARK_SUBMIT_OPTS" not in os.environ or _OURS in os.environ
_archive_options = ""


def _child_options() -> str:
    return f"{C1_ONLY} {_archive_options}".strip()


if _CHILD_OPTS_SET:
    os.environ[_OURS] = "1"
    os.environ["SPARK_SUBMIT_OPTS"] = _child_options()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="also run the tests marked slow (CI runs the full suite)")


def pytest_configure(config: pytest.Config) -> None:
    """Map the class archive into every JVM of the run: built first for the full suite
    (its dozens of JVMs repay the 70-110 s), used by the default run where it exists."""
    global _archive_options
    if not _CHILD_OPTS_SET:
        return  # the caller chose the JVMs' options
    import jvm_archive

    archive = jvm_archive.archive_path()
    worker = "PYTEST_XDIST_WORKER" in os.environ  # the controller built it, or could not
    if not archive.exists() and config.getoption("--full") and not worker:
        archive = jvm_archive.ensure_archive() or archive
    _archive_options = jvm_archive.options(archive if archive.exists() else None)
    os.environ["SPARK_SUBMIT_OPTS"] = _child_options()


# The Spark executor's pass (issue 43 point 2): under ``--full`` each fast test of these
# files runs twice, on the local executor and on the Spark executor (``[local]``,
# ``[spark]``); ``SBQUEUE_EXECUTOR=spark python3 -m pytest`` runs a whole run on Spark.
# Tests marked ``local_executor`` assert what only the local executor does and are left
# out on Spark; ``spark_target`` ones are expected to fail there (issue 43 point 3).
SPARK_PASS = ("test_sessions", "test_transactions", "test_duplicates", "test_topics")
# The S3 pass (issue 44): under ``--full`` these files' fast tests run once more with their
# namespace on the moto S3 server (``[s3]``, the local executor); ``SBQUEUE_TEST_STORE=s3``
# puts a whole run there. The run's session then has S3A (the ``spark`` fixture), so Spark
# plans and DataFrame reads in those tests reach the store too.
STORE_PASS = ("test_sessions", "test_client", "test_transactions", "test_topics", "test_admin")
EXECUTOR_ENV = "SBQUEUE_EXECUTOR"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    stem = metafunc.definition.path.stem
    if not metafunc.config.getoption("--full") or metafunc.definition.get_closest_marker(
            "slow") is not None:
        return
    passes = {"local": ("local", "local")}
    if stem in SPARK_PASS:
        passes["spark"] = ("spark", "local")
    if stem in STORE_PASS:
        passes["s3"] = ("local", "s3")
    if len(passes) > 1:
        metafunc.parametrize(("executor_pass", "store_pass"), list(passes.values()),
                             indirect=True, ids=list(passes))


@pytest.fixture(autouse=True)
def executor_pass(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The executor this test runs on: its ``[spark]`` variant sets ``SBQUEUE_EXECUTOR``."""
    name = getattr(request, "param", None)
    if name is not None:
        monkeypatch.setenv(EXECUTOR_ENV, name)
    return os.environ.get(EXECUTOR_ENV, "auto")


@pytest.fixture(autouse=True)
def store_pass(request: pytest.FixtureRequest) -> str:
    """Where this test's namespace lives: its ``[s3]`` variant puts it on the S3 server."""
    return str(getattr(request, "param", None) or os.environ.get("SBQUEUE_TEST_STORE", "local"))


def _on_spark(item: pytest.Item) -> bool:
    params = getattr(item, "callspec", None)
    if params is not None and "executor_pass" in params.params:
        return bool(params.params["executor_pass"] == "spark")
    return os.environ.get(EXECUTOR_ENV, "").strip().lower() == "spark"


def _for_executor(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out on Spark what only the local executor does; expect the Spark executor's
    unmet targets to fail."""
    local_only = [i for i in items if i.get_closest_marker("local_executor") and _on_spark(i)]
    if local_only:
        config.hook.pytest_deselected(items=local_only)
        items[:] = [i for i in items if i not in local_only]
    for item in items:
        if item.get_closest_marker("spark_target") and _on_spark(item):
            item.add_marker(pytest.mark.xfail(
                reason="issue 43 point 3: a target the Spark executor does not meet yet",
                strict=False))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _for_executor(config, items)
    if config.getoption("--full") or config.getoption("-m"):
        # The slow tests first, the longest first among them: two workers (``-n 2``) then
        # share the long ones and end together on the short ones.
        items.sort(key=_start_order)
        return  # the full suite, or the caller chose by marker
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


# Files of the slow tests that run a minute or more, longest first (decision 013).
LONGEST = ("test_soak_faults", "test_soak_run", "test_stream_kill", "test_s3_spark",
           "test_catalog_stores",
           "test_wheel", "test_exit", "test_notebooks", "test_connect", "test_maintenance_days",
           "test_stream_sink", "test_jobs", "test_cluster", "test_demo", "test_multiprocess")


def _start_order(item: pytest.Item) -> tuple[int, int]:
    """Slow before fast; among the slow, the files of LONGEST in its order (a stable sort
    keeps each file's tests in their written order)."""
    if not item.get_closest_marker("slow"):
        return (2, 0)
    stem = item.path.stem
    return (0, LONGEST.index(stem)) if stem in LONGEST else (1, 0)


def _uses_s3(item: pytest.Item) -> bool:
    """Whether a test puts a namespace on S3 (its ``s3_root``, an ``[s3]`` pass, a
    ``store`` parameter of ``s3``, or a whole run there)."""
    params = getattr(item, "callspec", None)
    chosen = params.params if params is not None else {}
    return ("s3_root" in getattr(item, "fixturenames", ()) or "s3" in (
        chosen.get("store_pass"), chosen.get("store"))
        or os.environ.get("SBQUEUE_TEST_STORE", "").strip().lower() == "s3")


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[object]:
    """The run's one session; where a test of the run uses S3, with S3A and the put-if-absent log
    store pointed at this process's S3 server (its AWS environment set for the whole
    process first: the JVM's S3A reads the keys from it)."""
    from sbqueue.spark import get_session, stop_session
    from sbqueue.spark.session import store_conf

    extra: dict[str, str] = {}
    if any(_uses_s3(item) for item in request.session.items):
        from s3_server import aws_env

        os.environ.update(aws_env(request.getfixturevalue("s3_endpoint")))
        extra = store_conf("s3://sbq-test")
    if _CHILD_OPTS_SET:  # C2 for this long-lived JVM, and the archive
        os.environ["SPARK_SUBMIT_OPTS"] = _archive_options
    try:
        session = get_session("sbqueue-tests", extra_conf=extra)
    finally:
        if _CHILD_OPTS_SET:
            os.environ["SPARK_SUBMIT_OPTS"] = _child_options()
    yield session
    stop_session()


@pytest.fixture
def namespace_root(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh namespace root: a local folder, or on the S3 server where the run or the
    test's pass asks for S3 (``SBQUEUE_TEST_STORE=s3``, the ``[s3]`` pass)."""
    if request.getfixturevalue("store_pass") == "s3":
        return str(request.getfixturevalue("s3_root"))
    return str(tmp_path / f"ns-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="session")
def azurite_endpoint() -> Iterator[str]:
    """An Azurite blob server process on 127.0.0.1 for this test process (issue 44 point
    7), installed from npm once per machine, with its container; its endpoint URL."""
    from az_server import azurite, azurite_blob

    try:
        found = azurite_blob()
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"Azurite could not be installed from npm: {exc!r}")
    if found is None:  # CI installs npm's packages: there a missing npm is a failure
        reason = "npm is needed to install Azurite (Debian: apt-get install npm)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with azurite() as endpoint:
        yield endpoint


@pytest.fixture
def az_root(azurite_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh namespace root on Azurite, with the environment pointing at it."""
    from az_server import azure_env, fresh_root

    for key, value in azure_env(azurite_endpoint).items():
        monkeypatch.setenv(key, value)
    return fresh_root()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server process on 127.0.0.1 for this test process (issue 44), with its
    bucket; its endpoint URL."""
    from s3_server import make_bucket, moto_server

    with moto_server() as endpoint:
        make_bucket(endpoint)
        yield endpoint


@pytest.fixture
def s3_root(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh namespace root on the S3 server, with the AWS environment pointing at it."""
    from s3_server import aws_env, fresh_root

    for key, value in aws_env(s3_endpoint).items():
        monkeypatch.setenv(key, value)
    return fresh_root()


@pytest.fixture
def admin(spark: object, namespace_root: str) -> object:
    from sbqueue.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(namespace_root, spark=spark)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> Iterator[object]:
    """The engine's clock (``sbqueue.core.clock``): a test moves it with ``advance`` instead
    of sleeping until a lock, schedule or time to live runs out; put back when it ends."""
    from sbqueue.core import clock as engine_clock

    yield engine_clock
    engine_clock.reset()


@pytest.fixture
def spark_jobs(spark: object) -> Callable[[Callable[[], T]], tuple[T, int]]:
    """``spark_jobs(fn)``: ``fn()``'s result and the Spark jobs it ran, counted through a
    job group of this thread (Spark's status tracker)."""
    sc = spark.sparkContext  # type: ignore[attr-defined]

    def run(fn: Callable[[], T]) -> tuple[T, int]:
        group = f"test-{uuid.uuid4().hex}"
        sc.setJobGroup(group, group)
        try:
            out = fn()
        finally:
            jobs = len(sc.statusTracker().getJobIdsForGroup(group))
            sc.setJobGroup("", "")
        return out, jobs
    return run
