"""Scale case ``floor`` of ``manage.py bench scale`` (SQLite): the best the loop's time
per item could be with the statements it runs now, so the loop's ratio to a bare claim +
complete (issue 39, point 6: goal >= 0.1) is read beside the ratio its SQL alone would
reach.

Steps, ``ROUNDS`` times, on one agent with ``QUEUED`` queued items (the offline brain,
the deliberation off, as the ``queue`` case's loop):
1. A copy of the database as it is (SQLite's online backup).
2. One run of ``attention.loop.run_attention`` over K items in this thread, timed, every
   statement it runs recorded with its parameters, and every COMMIT / ROLLBACK.
3. K bare claim + complete pairs on the same queue (``markus.bench.scale_queue``'s
   baseline, through Django's cursor).
4. On the copy, through a plain ``sqlite3`` connection (the database's settings: WAL,
   ``synchronous=NORMAL``, Django's SQL functions registered): the recorded statements
   replayed in order with their parameters and transactions (the same rows, since the
   copy is the database before the run), a bare claim + complete pair after each item's
   share of them (K pairs, in turn with the replay).

Figures: the loop / bare (the ``queue`` case's figure), and the replay / bare on the copy
(what no Python at all around these statements would reach), with the statements and
commits per item.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.backends.sqlite3 import _functions  # type: ignore[attr-defined]
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
from django.utils import timezone

from attention import loop
from mailbox.registry import Status
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import new_id

from .mailbox import CLAIM_SQL, COMPLETE_SQL, quiet_wakeups
from .report import Figure
from .scale_queue import bare_claims, delete_items, insert_queued

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "scale"
ROUNDS = 3
QUEUED = 2_000
K = 100
Entry = tuple[str, str, Any, bool]  # ("x", sql, params, many) or ("commit" | "rollback", "", None, False)


def recorded_run(agent_id: str, k: int) -> tuple[list[Entry], float]:
    """One run of the loop over k items: its statements and transaction ends, in order,
    and its ms per item."""
    log: list[Entry] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        log.append(("x", sql, params, many))
        return execute(sql, params, many, context)

    conn: Any = connection  # its private _commit / _rollback: where Django ends a transaction
    commit, rollback = conn._commit, conn._rollback

    def committed() -> None:
        log.append(("commit", "", None, False))
        commit()

    def rolled_back() -> None:
        log.append(("rollback", "", None, False))
        rollback()

    conn._commit, conn._rollback = committed, rolled_back
    try:
        with connection.execute_wrapper(record):
            start = time.perf_counter()
            result = loop.run_attention(agent_id, budget=k)
            ms = (time.perf_counter() - start) * 1000 / max(1, result.processed)
    finally:
        del conn._commit, conn._rollback
    if result.processed != k:
        raise RuntimeError(f"bench: the run processed {result.processed} of {k} items ({result.status})")
    return log, ms


def replay_beside_bare(
    raw: sqlite3.Connection, log: list[Entry], agent_id: str, k: int
) -> tuple[float, float, float, float]:
    """The recorded statements on a plain connection, in order, with one bare claim +
    complete pair on the same connection after each item's share of the transactions
    (the two in turn, so both see the same load); the mean ms of an item's share and of
    a pair, then their medians."""
    cursor = raw.cursor()
    made = {sql: FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%") for kind, sql, _, _ in log if kind == "x"}
    per_item = max(1, sum(1 for e in log if e[0] == "commit") // k)
    claim, complete = (FORMAT_QMARK_REGEX.sub("?", sql) for sql in (CLAIM_SQL, COMPLETE_SQL))
    replayed: list[float] = []
    bare: list[float] = []
    chunk = 0.0
    commits = 0

    def pair() -> float:
        start = time.perf_counter()
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        cursor.execute(claim, [Status.PROCESSING.value, now, agent_id, Status.QUEUED.value, Status.QUEUED.value])
        row = cursor.fetchone()
        if row is None:
            raise RuntimeError("bench: the copy's queue ran out")
        cursor.execute(complete, [Status.COMPLETED.value, now, row[0], Status.PROCESSING.value])
        return time.perf_counter() - start

    for kind, sql, params, many in log:
        start = time.perf_counter()
        if kind != "x":
            if raw.in_transaction:
                raw.commit() if kind == "commit" else raw.rollback()
        elif many:
            cursor.executemany(made[sql], params)
        else:
            cursor.execute(made[sql], () if params is None else params)
        if kind == "x" and cursor.description:
            cursor.fetchall()
        chunk += time.perf_counter() - start
        if kind == "commit":
            commits += 1
            if commits % per_item == 0 and not raw.in_transaction:
                replayed.append(chunk)
                chunk = 0.0
                if len(bare) < k:
                    bare.append(pair())
    while len(bare) < k:
        bare.append(pair())
    # Means (throughput: a checkpoint of the WAL is the writer's cost too) and medians
    # (another process's burst on a shared machine lands in one piece, not in all).
    return (
        statistics.fmean(replayed) * 1000,
        statistics.fmean(bare) * 1000,
        statistics.median(replayed) * 1000,
        statistics.median(bare) * 1000,
    )


def copy_of_database(path: str) -> sqlite3.Connection:
    """A copy of the database as it is now, opened as the project opens its own."""
    connection.ensure_connection()
    target = sqlite3.connect(path)
    connection.connection.backup(target)
    target.close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")
    _functions.register(raw)
    return raw


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    if connection.vendor != "sqlite":
        stdout.write("scale/floor: SQLite only (a copy of the database to replay on)\n")
        return []
    old = dict(settings.MARKUS)
    settings.MARKUS.update(LLM_PROVIDER="offline", DELIBERATION=False, WAKE_ON_ENQUEUE=False)
    user = get_user_model().objects.create_user(new_id("bench"))
    agent = agent_create(name="bench-floor", owner=user, agent_id=new_id("bench"))[0].id
    scratch = tempfile.mkdtemp(prefix="markus-floor-")
    rows: list[tuple[float, float, float, float, float, float, float]] = []
    try:
        insert_queued([agent], QUEUED, new_id("f").replace("_", "")[-10:])
        stdout.write(f"scale/floor on sqlite: {QUEUED} queued, {K} items a round, {ROUNDS} rounds\n")
        stdout.write(
            f"  {'loop ms':>8} {'bare ms':>8} {'bare/loop':>9} | {'replay ms':>9} {'bare ms':>8} "
            f"{'bare/replay':>11} | {'p50 replay':>9} {'p50 bare':>8} {'bare/replay':>11} | "
            f"{'stmts':>5} {'commits':>7}\n"
        )
        with quiet_wakeups():
            loop.run_attention(agent, budget=1)  # warm: the statements made once per connection
            for r in range(ROUNDS):
                raw = copy_of_database(os.path.join(scratch, f"copy{r}.sqlite3"))
                try:
                    log, loop_ms = recorded_run(agent, K)
                    bare_ms = bare_claims(agent, K)
                    replay_ms, raw_ms, replay_p50, raw_p50 = replay_beside_bare(raw, log, agent, K)
                finally:
                    raw.close()
                statements = sum(1 for e in log if e[0] == "x") / K
                commits = sum(1 for e in log if e[0] == "commit") / K
                rows.append((loop_ms, bare_ms, replay_ms, raw_ms, raw_p50 / replay_p50, statements, commits))
                stdout.write(
                    f"  {loop_ms:>8.2f} {bare_ms:>8.3f} {bare_ms / loop_ms:>9.3f} | {replay_ms:>9.3f} "
                    f"{raw_ms:>8.3f} {raw_ms / replay_ms:>11.3f} | {replay_p50:>9.3f} {raw_p50:>8.3f} "
                    f"{raw_p50 / replay_p50:>11.3f} | {statements:>5.1f} {commits:>7.1f}\n"
                )
    finally:
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        Agent.objects.filter(id=agent).update(status=Agent.RunStatus.STOPPED)
        delete_items([agent])
        Agent.objects.filter(id=agent).delete()
        user.delete()
        shutil.rmtree(scratch, ignore_errors=True)
    loop_ratio = statistics.median(b / lp for lp, b, *_ in rows)
    floor = statistics.median(raw / rep for _, _, rep, raw, *_ in rows)
    floor_p50 = statistics.median(r[4] for r in rows)
    statements = statistics.median(r[5] for r in rows)
    return [
        Figure(
            SUITE,
            f"loop throughput / bare claim+complete, {QUEUED} queued (floor case)",
            loop_ratio,
            "x",
            baseline=f"median of {ROUNDS} rounds of {K} items, bare claim + complete on the same queue",
            goal=0.1,
        ),
        Figure(
            SUITE,
            "the loop's statements replayed without Python / bare claim+complete (the floor)",
            floor,
            "x",
            baseline=f"{statements:.1f} statements a item replayed on a copy of the database, plain sqlite3,"
            f" beside bare claim + complete on the same copy, mean ms of each; median of {ROUNDS} rounds",
        ),
        Figure(
            SUITE,
            "the floor by medians (an item's statements / one bare pair, p50 of each)",
            floor_p50,
            "x",
            baseline=f"the same replay, p50 of an item's share beside p50 of a bare pair; median of {ROUNDS} rounds",
        ),
    ]
