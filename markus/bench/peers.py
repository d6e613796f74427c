"""Peers benchmark (PostgreSQL only): the Markus mailbox beside the PostgreSQL queues a
Python team would pick instead (pgqueuer, procrastinate, oban), in one run on the
configured database, each against a bare-SQL baseline measured in the same run.

One producer then one consumer, one transaction per job, N jobs per system (``--n``,
2000): enqueues, then claim + ack until the queue is empty, in rounds that alternate
with a bare-SQL baseline (INSERT / ``UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING`` /
UPDATE on a scratch table) on the same driver as the system (sync psycopg through
Django's connection for the mailbox; async psycopg for the peers), so that the noise of
a shared machine falls on both sides of each ratio. Each peer lives in a schema of its
own (``markus_bench_<peer>``), installed with its own install script and dropped
afterwards; Markus's tables are only touched by the mailbox services, on a throwaway
agent deleted at the end.

The peers are never runtime dependencies: ``bench peers --install`` pip-installs the
pinned versions into this venv (oban needs Python >= 3.12: on an older venv it gets a
side venv in ``var/bench-peers/oban`` from a newer interpreter found on the machine,
and runs there as a subprocess). A peer that is not installed is reported and skipped.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from mailbox.services import item_enqueued, mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import new_id

from . import peers_async
from .peers_async import CALLS, MIN_PYTHON, PINS, WARMUP, Clock, Measured, Rates, rounds
from .report import Figure

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "peers"
DEFAULT_N = 2000
ENQUEUE_GOAL = 0.9
CLAIM_ACK_GOAL = 0.75
NOT_INSTALLED = "not installed (run bench peers --install)"
SYNC_SCHEMA = f"{peers_async.SCHEMA_PREFIX}bare_sync_{os.getpid()}"
SIDE_TIMEOUT_S = 1800


# -- where each peer runs ----------------------------------------------------------------


def side_venv(peer: str) -> Path:
    """The venv a peer gets when this one's Python is too old for it."""
    return Path(settings.BASE_DIR) / "var" / "bench-peers" / peer


def _side_python(peer: str) -> Path:
    return side_venv(peer) / "bin" / "python"


def _supported_here(peer: str) -> bool:
    return sys.version_info[:2] >= MIN_PYTHON.get(peer, (3, 0))


def locate(peer: str) -> str:
    """Where a peer runs: "here" (importable in this interpreter), "side" (in its side venv)
    or "" (not installed)."""
    if _supported_here(peer) and importlib.util.find_spec(peer) is not None:
        return "here"
    if not _supported_here(peer) and _side_python(peer).exists():
        return "side"
    return ""


def find_python(minimum: tuple[int, int]) -> str | None:
    """An interpreter on this machine at least ``minimum``: on PATH, or one of pyenv's."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(minimum[1], 16)]
    pyenv = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv, "versions", "3.*", "bin", "python3")), reverse=True)
    check = f"import sys; sys.exit(0 if sys.version_info[:2] >= {minimum!r} else 1)"
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", check], capture_output=True).returncode == 0:
            return candidate
    return None


def install(stdout: SupportsWrite[str]) -> None:
    """pip-install the pinned peers: into this venv when its Python suits them, else into
    a side venv made from a newer interpreter."""
    here = [PINS[p] for p in PINS if _supported_here(p)]
    stdout.write(f"installing {', '.join(here)} into this venv\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *here], check=True)
    for peer in (p for p in PINS if not _supported_here(p)):
        wanted = ".".join(map(str, MIN_PYTHON[peer]))
        python = find_python(MIN_PYTHON[peer])
        if python is None:
            stdout.write(f"{peer} needs Python >= {wanted} and none was found on this machine: not installed\n")
            continue
        venv = side_venv(peer)
        stdout.write(f"installing {PINS[peer]} into a Python >= {wanted} side venv ({venv})\n")
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(_side_python(peer)), "-m", "pip", "install", "--quiet", PINS[peer]], check=True)


def dsn() -> str:
    """The configured database as a libpq connection string for the peers' own connections."""
    s = connection.settings_dict
    params = {"dbname": s["NAME"], "user": s["USER"], "password": s["PASSWORD"], "host": s["HOST"], "port": s["PORT"]}
    params.update({k: v for k, v in s.get("OPTIONS", {}).items() if k in ("sslmode", "sslrootcert", "service")})
    return make_conninfo(**{k: str(v) for k, v in params.items() if v})


def _last_error(stderr: str, returncode: int) -> str:
    """The exception line of a traceback on stderr (not the SQL excerpt under it)."""
    lines = [line for line in stderr.splitlines() if line and not line[0].isspace()]
    errors = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(:|$)", line)]  # "module.Class: message"
    return (errors or lines or [f"exit status {returncode}"])[-1]


def measure_peer(peer: str, where: str, n: int) -> Measured:
    if where == "here":
        return peers_async.measure(peer, dsn(), n)
    proc = subprocess.run(
        [str(_side_python(peer)), "-I", peers_async.__file__, peer, "--n", str(n)],
        env={**os.environ, peers_async.DSN_ENV: dsn()},
        capture_output=True,
        text=True,
        timeout=SIDE_TIMEOUT_S,
    )
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    doc: dict[str, Any] = (
        json.loads(last) if last.startswith("{") else {"error": _last_error(proc.stderr, proc.returncode)}
    )
    if "error" in doc:
        raise RuntimeError(doc["error"])
    return Measured(Rates(**doc["system"]), Rates(**doc["bare"]), doc["version"], doc["python"])


# -- the mailbox and its baseline, on Django's connection ----------------------------------


class SyncOps:
    """peers_async.AsyncOps, synchronous: ``enqueue(i)`` and ``claim_ack()``."""

    def __init__(self, enqueue: Callable[[int], None], claim_ack: Callable[[], bool]) -> None:
        self.enqueue, self.claim_ack = enqueue, claim_ack

    def warm_up(self) -> None:
        for i in range(WARMUP):
            self.enqueue(i)
        while self.claim_ack():
            pass

    def round(self, k: int, clock: Clock) -> None:
        start = time.perf_counter()
        for i in range(k):
            self.enqueue(i)
        clock.enqueue_s += time.perf_counter() - start
        done = 0
        start = time.perf_counter()
        while self.claim_ack():
            done += 1
        clock.claim_ack_s += time.perf_counter() - start
        if done != k:
            raise RuntimeError(f"drained {done} jobs, expected {k}")


def interleave(system: SyncOps, bare: SyncOps, n: int) -> tuple[Rates, Rates]:
    """peers_async.interleave, synchronous."""
    system.warm_up()
    bare.warm_up()
    system_clock, bare_clock = Clock(), Clock()
    for r, k in enumerate(rounds(n)):
        turns = [(system, system_clock), (bare, bare_clock)]
        for ops, clock in turns if r % 2 == 0 else reversed(turns):
            ops.round(k, clock)
    return system_clock.rates(n), bare_clock.rates(n)


def _in_schema(statement: str) -> str:
    return re.sub(r"\bbare_jobs\b", f"{SYNC_SCHEMA}.bare_jobs", statement)


@contextmanager
def bare_sync() -> Iterator[SyncOps]:
    """The baseline on Django's connection (sync psycopg, autocommit): the mailbox's driver."""
    insert, claim, ack = (
        _in_schema(s) for s in (peers_async.BARE_INSERT, peers_async.BARE_CLAIM, peers_async.BARE_ACK)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {SYNC_SCHEMA} CASCADE")
        cursor.execute(f"CREATE SCHEMA {SYNC_SCHEMA}")
        try:
            cursor.execute(_in_schema(peers_async.BARE_TABLE))
            cursor.execute(_in_schema(peers_async.BARE_INDEX))

            def enqueue(i: int) -> None:
                params: list[Any] = [peers_async.QUEUE, i % 5, Jsonb(_payload(i))]
                cursor.execute(insert, params)
                cursor.fetchone()

            def claim_ack() -> bool:
                cursor.execute(claim, [peers_async.QUEUE])
                row = cursor.fetchone()
                if row is None:
                    return False
                cursor.execute(ack, [row[0]])
                return True

            yield SyncOps(enqueue, claim_ack)
        finally:
            cursor.execute(f"DROP SCHEMA IF EXISTS {SYNC_SCHEMA} CASCADE")


def _payload(i: int) -> dict[str, str]:
    return {"summary": f"bench item {i}", "content": f"bench content {i}"}


@contextmanager
def _quiet_wakeups() -> Iterator[None]:
    """Disconnect the receivers of ``item_enqueued`` (the attention wake-up) for a while."""
    with mock.patch.object(item_enqueued, "receivers", []):
        item_enqueued.sender_receivers_cache.clear()
        yield
    item_enqueued.sender_receivers_cache.clear()


@contextmanager
def mailbox() -> Iterator[SyncOps]:
    """``mailbox_enqueue``; ``lifecycle.claim_next`` + ``lifecycle.complete``, on a throwaway
    external, stopped agent (no sweep or worker touches it), wake-ups muted."""
    agent, _ = agent_create(name="bench-peers", kind=Agent.Kind.EXTERNAL, agent_id=new_id("bench"))
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    try:
        with _quiet_wakeups():

            def enqueue(i: int) -> None:
                mailbox_enqueue(
                    agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload=_payload(i), priority=i % 5
                )

            def claim_ack() -> bool:
                item = lifecycle.claim_next(agent_id=agent.id)
                if item is None:
                    return False
                lifecycle.complete(item.id)
                return True

            yield SyncOps(enqueue, claim_ack)
    finally:
        MailboxItem.objects.filter(agent_id=agent.id).delete()
        agent.delete()


# -- the suite -------------------------------------------------------------------------------


def _figures(label: str, measured: Measured, driver: str, goals: bool) -> list[Figure]:
    s, b = measured.system, measured.bare
    return [
        Figure(
            SUITE,
            f"{label}: enqueue / bare INSERT",
            s.enqueue / b.enqueue,
            "x",
            f"bare INSERT {b.enqueue:.0f}/s on {driver} ({label} {s.enqueue:.0f}/s)",
            ENQUEUE_GOAL if goals else None,
        ),
        Figure(
            SUITE,
            f"{label}: claim+ack / bare SQL",
            s.claim_ack / b.claim_ack,
            "x",
            f"bare SKIP LOCKED claim + UPDATE {b.claim_ack:.0f}/s on {driver} ({label} {s.claim_ack:.0f}/s)",
            CLAIM_ACK_GOAL if goals else None,
        ),
    ]


def _pg_version() -> str:
    version: int = connection.pg_version  # type: ignore[attr-defined]
    return f"{version // 10000}.{version % 100}"


def _line(stdout: SupportsWrite[str], label: str, driver: str, m: Measured) -> None:
    s, b = m.system, m.bare
    stdout.write(
        f"  {label:<22} {driver:<44} {s.enqueue:7.0f} {b.enqueue:7.0f} {s.enqueue / b.enqueue:6.2f}"
        f"   {s.claim_ack:7.0f} {b.claim_ack:7.0f} {s.claim_ack / b.claim_ack:6.2f}\n"
    )


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    if connection.vendor != "postgresql":
        raise CommandError(
            f"bench peers compares PostgreSQL queues and needs PostgreSQL; the configured database is "
            f"{connection.vendor}: set DATABASE_URL to a PostgreSQL database"
        )
    n = options.get("n") or DEFAULT_N
    if options.get("install"):
        install(stdout)
    connection.ensure_connection()
    stdout.write(
        f"peers bench on PostgreSQL {_pg_version()}, N={n} jobs per system: one producer then one"
        f" consumer, one transaction per job, in {len(rounds(n))} rounds alternating with the baseline (bare SQL on"
        " the same driver)\n"
    )
    stdout.write(
        f"  {'system':<22} {'driver':<44} {'enq/s':>7} {'bare/s':>7} {'ratio':>6}"
        f"   {'claim/s':>7} {'bare/s':>7} {'ratio':>6}\n"
    )
    sync_driver = "sync psycopg (Django)"
    with mailbox() as system_ops, bare_sync() as bare_ops:
        system, baseline = interleave(system_ops, bare_ops, n)
    measured = Measured(system, baseline, "", sys.version.split()[0])
    _line(stdout, "Markus mailbox", sync_driver, measured)
    figures = _figures("mailbox", measured, sync_driver, goals=True)
    for peer in PINS:
        where = locate(peer)
        if not where:
            reason = NOT_INSTALLED
            if not _supported_here(peer):
                reason += f"; needs Python >= {'.'.join(map(str, MIN_PYTHON[peer]))}"
            stdout.write(f"  {peer:<22} skipped: {reason}\n")
            continue
        try:
            m = measure_peer(peer, where, n)
        except Exception as exc:  # one peer failing must not hide the others
            stdout.write(f"  {peer:<22} failed: {peers_async.describe(exc)}\n")
            continue
        label = f"{peer} {m.version}"
        driver = "async psycopg" + (f" (Python {m.python}, side venv)" if where == "side" else "")
        _line(stdout, label, driver, m)
        figures += _figures(label, m, driver, goals=False)
    peer_calls = " | ".join(f"{peer}: {calls}" for peer, calls in CALLS.items())
    stdout.write(f"  calls: mailbox: mailbox_enqueue; lifecycle.claim_next + lifecycle.complete | {peer_calls}\n")
    return figures
