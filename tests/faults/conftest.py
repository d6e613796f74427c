"""The fault suite's fixtures: a migrated template database per session, and per
scenario a fresh copy of it, its own Redis, the slow LLM stub and a ``Cluster`` to
start real processes in. Everything a scenario started is killed at its teardown, also
when it fails (then the tails of the process logs are printed)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .harness import (
    ROOT,
    SWEEP_SECONDS,
    Cluster,
    PgServer,
    django_on,
    pg_base_url,
    process_env,
    start_beat_clocks,
    use_in_memory_layer,
    with_database,
)
from .own_postgres import OwnPostgres
from .stub_llm import SlowLLM

_numbers = itertools.count(1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"faults_{report.when}", report)


@pytest.fixture(scope="session")
def faults_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PgServer, str]]:
    """The PostgreSQL server and a migrated template database for this session."""
    base = pg_base_url()
    if base is None or shutil.which("redis-server") is None:
        # Selected only by the PostgreSQL pass (markers): a missing service fails, never skips.
        pytest.fail("the fault suite needs MARKUS_TEST_PG_URL (PostgreSQL) and redis-server")
    pg = PgServer(base)
    pg.drop_leftovers()
    template = f"faults_{os.getpid()}_template"
    url = pg.create(template)
    workdir = tmp_path_factory.mktemp("faults-template")
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v0"],
        cwd=workdir,
        # migrate creates the beat entries (attention.schedules), the sweep's interval
        # from MARKUS_SWEEP_SECONDS; the processes never overwrite an existing entry.
        env=process_env(DATABASE_URL=url, MARKUS_DATA_DIR=str(workdir), MARKUS_SWEEP_SECONDS=str(SWEEP_SECONDS)),
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        pg.drop(template)
        pytest.fail(f"migrating the template database failed:\n{done.stdout}\n{done.stderr}")
    try:
        yield pg, template
    finally:
        pg.drop(template)


@contextlib.contextmanager
def _running(
    db_url: str,
    db_name: str,
    pg: PgServer | OwnPostgres,
    workdir: Path,
    django_db_blocker,
    request: pytest.FixtureRequest,
) -> Iterator[Cluster]:
    """A scenario's Redis, the LLM stub and this process's ORM on ``db_url``; at the end
    every process is stopped (their logs printed if the test failed)."""
    (workdir / "data").mkdir()
    llm = SlowLLM().start()
    c = Cluster(db_url=db_url, db_name=db_name, pg=pg, llm_url=llm.url, workdir=workdir)
    c.llm = llm
    try:
        c.start_redis()
        with django_db_blocker.unblock(), django_on(db_url):
            start_beat_clocks()
            yield c
    finally:
        failed = getattr(request.node, "faults_call", None)
        c.stop()
        llm.stop()
        if failed is not None and failed.failed:
            print(f"\nprocess logs ({workdir}):\n{c.logs()}")


@pytest.fixture
def cluster(
    faults_pg: tuple[PgServer, str],
    tmp_path,
    django_db_blocker,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Iterator[Cluster]:
    """A fresh database (a copy of the template), its Redis, the LLM stub, and this
    process's ORM pointed at that database. Processes are started by the test. The
    events this process sends (seeding, direct enqueues) stay in memory: it touches no
    Redis but the scenario's, and that only through the processes it starts."""
    use_in_memory_layer(monkeypatch)
    pg, template = faults_pg
    name = f"faults_{os.getpid()}_{next(_numbers)}"
    db_url = pg.create(name, template=template)
    try:
        with _running(db_url, name, pg, tmp_path, django_db_blocker, request) as c:
            yield c
    finally:
        if os.environ.get("MARKUS_FAULTS_KEEP_DB"):  # for a post-mortem: psql -d <name>
            print(f"\nkept database {name}")
        else:
            pg.drop(name)


@pytest.fixture
def own_server() -> Iterator[OwnPostgres]:
    """A PostgreSQL server of the test's own, running, to crash (``OwnPostgres``)."""
    own = OwnPostgres()
    try:
        own.start()
        yield own
    finally:
        own.stop()


@pytest.fixture
def own_database(faults_pg: tuple[PgServer, str], own_server: OwnPostgres) -> str:
    """A copy of the suite's migrated template on ``own_server``: its URL."""
    pg, template = faults_pg
    return own_server.copy_database(with_database(pg.base_url, template), "faults")


@pytest.fixture
def orm_on_own_server(
    own_server: OwnPostgres, own_database: str, django_db_blocker, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OwnPostgres]:
    """``own_server`` with this process's ORM pointed at its copy of the template, the
    offline brain and the embedded channel layer: in-process scenarios, no cluster."""
    from django.conf import settings

    from markus.llm.base import set_provider_override

    use_in_memory_layer(monkeypatch)
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    try:
        with django_db_blocker.unblock(), django_on(own_database):
            yield own_server
    finally:
        set_provider_override(None)


@pytest.fixture
def cluster_on_own_server(
    own_server: OwnPostgres,
    own_database: str,
    tmp_path,
    django_db_blocker,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Iterator[Cluster]:
    """``cluster`` on ``own_server``'s database, so the test may crash the server."""
    use_in_memory_layer(monkeypatch)
    with _running(own_database, "faults", own_server, tmp_path, django_db_blocker, request) as c:
        yield c


@pytest.fixture
def report(capsys: pytest.CaptureFixture[str]) -> Callable[[str], None]:
    """Print a scenario's figures line on the terminal (also with -q and captured output)."""

    def emit(line: str) -> None:
        with capsys.disabled():
            print(f"\n{line}", flush=True)

    return emit


@pytest.fixture
def clock() -> Callable[[], float]:
    start = time.monotonic()
    return lambda: time.monotonic() - start
