"""Scale case ``queue`` of ``manage.py bench scale``: what one item, one queue read, one
sweep and one timeline page cost as the queued items grow (1k / 10k / 100k) and as
they spread over more agents (1 / 10 / 100), each beside its baseline from the same
run.

Steps:
1. A throwaway user, ``max(AGENTS)`` internal agents it owns (the offline brain, the
   deliberation off, the wake-up on enqueue off: only this case works the queues), and
   one more agent with a single item: the one-row page's baseline.
2. For each size N and agent count A: N queued items spread evenly over the first A
   agents (the others stopped), written by one ``INSERT … SELECT`` over a generated
   series (PostgreSQL: then ``VACUUM (ANALYZE)``, as autovacuum would). Then, on the first
   agent (it holds N / A of them):
   - the queue read: ``attention.loop.read_queue``, p50 of READS, beside the bare
     SELECT of the head (the two called in turn, as every figure with a baseline
     here: both see the same load) (the same rows by the partial index, without the depth or
     the due-deferred subqueries);
   - the sweep: ``attention.services.sweep`` with its wake-ups counted, not sent, p50
     of SWEEPS, beside the same sweep at the smallest size and one agent;
   - the timeline's first page: ``GET /api/agents/<id>/mailbox?limit=50`` (and
     ``queuedLimit=50``) through the real URL, view and serialisation, p50 of PAGES,
     beside the same request for an agent with 50 queued items (a timeline of one
     page); and the one-row page (``limit=1``) beside the same for an agent with one;
   - the loop: a run of ``attention.loop.run_attention`` over K items in this thread
     (ms per item), then the bare claim + complete SQL of K items of the same queue
     (``markus.bench.mailbox``), LOOP_ROUNDS times, the median of each (on SQLite also
     by this thread's CPU time, the database's work in it); and the loop's statements
     per item in a further run.
   The rows are deleted before the next size.
3. Everything is deleted, whatever happened.

Figures: for each (N, A): the loop's throughput as a share of the bare claim + complete
(goal >= 0.1), the queue read / bare head SELECT, the sweep / the smallest sweep, the
first page / a one-page timeline's and the one-row page / a one-row timeline's (goal
<= 1.2), and statements per item (flat).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any
from unittest import mock

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from attention import loop, queue_read, services
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import new_id

from .mailbox import CLAIM_SQL, COMPLETE_SQL, quiet_wakeups
from .report import Figure, timings_ms

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "scale"
SIZES = (1_000, 10_000, 100_000)
AGENTS = (1, 10, 100)
READS = 30
SWEEPS = 5
PAGES = 30
LOOP_ITEMS = 20  # K, or fewer when the first agent holds fewer than (2 LOOP_ROUNDS + 1) K
LOOP_ROUNDS = 3
PAGE = 50
TABLE = MailboxItem._meta.db_table
COLUMNS = "id, agent_id, source_type, priority, status, payload, metadata, marks, queued_at, attempts, drop_reason"
HEAD_SQL = (
    f"SELECT {', '.join(f.column for f in MailboxItem._meta.concrete_fields)} FROM {TABLE}"
    f" WHERE agent_id = %s AND status = '{Status.QUEUED.value}' ORDER BY priority, queued_at, id LIMIT %s"
)


def insert_queued(agent_ids: list[str], n: int, tag: str) -> None:
    """N queued system events, round-robin over ``agent_ids``, one a second up to a
    minute ago, in one statement."""
    start = timezone.now() - timedelta(seconds=n + 60)
    kind = MailboxType.SYSTEM_EVENT.value
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {TABLE} ({COLUMNS}) SELECT %s || g, (%s::text[])[1 + g %% %s], %s, 2, 'queued',"
                " jsonb_build_object('summary', 'scale item ' || g, 'content', 'scale content ' || g),"
                " '{}'::jsonb, '{}'::jsonb, %s + g * interval '1 second', 0, ''"
                " FROM generate_series(0, %s - 1) AS g",
                [f"mbx_{tag}_", agent_ids, len(agent_ids), kind, start, n],
            )
            # As autovacuum leaves a queue that grew over minutes, not seconds: analysed, and
            # vacuumed (since PostgreSQL 13 inserts alone trigger it), so the visibility
            # map lets a count of index entries skip the rows (an index-only scan).
            cursor.execute(f"VACUUM (ANALYZE) {TABLE}")
        else:
            base = start.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S")
            cursor.execute(
                f"WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < %s - 1)"
                f" INSERT INTO {TABLE} ({COLUMNS}) SELECT %s || i, json_extract(%s, '$[' || (i %% %s) || ']'),"
                " %s, 2, 'queued',"
                " json_object('summary', 'scale item ' || i, 'content', 'scale content ' || i), '{}', '{}',"
                " strftime('%%Y-%%m-%%d %%H:%%M:%%S.000000', %s, '+' || i || ' seconds'), 0, '' FROM g",
                [n, f"mbx_{tag}_", json.dumps(agent_ids), len(agent_ids), kind, base],
            )


def delete_items(agent_ids: list[str]) -> None:
    """The items the loop touched (and their records) by the ORM, the rest raw: the
    ORM would collect 100,000 rows first."""
    MailboxItem.objects.filter(agent_id__in=agent_ids).exclude(status=Status.QUEUED).delete()
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {TABLE} WHERE agent_id IN ({', '.join(['%s'] * len(agent_ids))})",
            agent_ids,
        )


def p50_ms(fn: Callable[[], object], reps: int, warmup: int = 2) -> float:
    return statistics.median(timings_ms(fn, reps, warmup=warmup))


def paired_ms(fn: Callable[[], object], base: Callable[[], object], reps: int, warmup: int = 2) -> tuple[float, float]:
    """p50 ms of ``fn`` and of its baseline ``base``, called in turn: on a shared,
    noisy machine both see the same load, so their ratio holds where their times do not."""
    for _ in range(warmup):
        fn()
        base()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(reps):
        for which, call in enumerate((fn, base)):
            start = time.perf_counter()
            call()
            times[which].append((time.perf_counter() - start) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def bare_head(agent_id: str) -> Callable[[], object]:
    def select() -> object:
        with connection.cursor() as cursor:
            cursor.execute(HEAD_SQL, [agent_id, queue_read.QUEUE_READ_LIMIT])
            return cursor.fetchall()

    return select


def sweep_counted() -> Callable[[], object]:
    def once() -> object:
        with mock.patch.object(services, "wake") as wake:
            services.sweep()
        return wake.call_count

    return once


def page_of(api: APIClient, agent_id: str, limit: int = PAGE) -> Callable[[], object]:
    url = f"/api/agents/{agent_id}/mailbox"

    def get() -> object:
        response = api.get(url, {"limit": limit, "queuedLimit": limit})
        if response.status_code != 200:
            raise RuntimeError(f"bench: the timeline answered {response.status_code}")
        return response

    return get


def bare_claims(agent_id: str, k: int) -> float:
    """k bare claim + complete pairs on the head of the agent's queue (the SQL of
    ``markus.bench.mailbox``), the baseline of the loop's time per item: their ms per
    pair done."""
    ops, done = connection.ops, 0
    start = time.perf_counter()
    with connection.cursor() as cursor:
        for _ in range(k):
            now = ops.adapt_datetimefield_value(timezone.now())
            cursor.execute(
                CLAIM_SQL, [Status.PROCESSING.value, now, agent_id, Status.QUEUED.value, Status.QUEUED.value]
            )
            row = cursor.fetchone()
            if row is None:
                break
            cursor.execute(COMPLETE_SQL, [Status.COMPLETED.value, now, row[0], Status.PROCESSING.value])
            done += 1
    return (time.perf_counter() - start) * 1000 / max(1, done)


@dataclass
class LoopTimes:
    """``loop_per_item``'s figures: ms per item of the loop and per bare pair (wall
    time, and this thread's CPU time), the medians of LOOP_ROUNDS rounds, and the loop's
    statements per item."""

    loop_ms: float
    bare_ms: float
    loop_cpu_ms: float
    bare_cpu_ms: float
    statements: float


def loop_per_item(agent_id: str, k: int) -> LoopTimes:
    """ms per item of a run of the loop over k items of the agent's queue, its
    statements per item (a further run of k), and the ms per item of k bare claim +
    complete pairs on the same queue: LOOP_ROUNDS rounds of a run then k pairs, the
    median of each (one round alone swung 30-fold with the other sessions' load). Each
    also in this thread's CPU time, which the other sessions' load moves less (on
    SQLite the database's own work is in it; on PostgreSQL it is the server's)."""
    loops: list[float] = []
    bares: list[float] = []
    loop_cpu: list[float] = []
    bare_cpu: list[float] = []
    for _ in range(LOOP_ROUNDS):
        start, cpu = time.perf_counter(), time.thread_time()
        result = loop.run_attention(agent_id, budget=k)
        loop_cpu.append((time.thread_time() - cpu) * 1000 / max(1, result.processed))
        loops.append((time.perf_counter() - start) * 1000 / max(1, result.processed))
        if result.processed != k:
            raise RuntimeError(f"bench: the run processed {result.processed} of {k} items ({result.status})")
        cpu = time.thread_time()
        bares.append(bare_claims(agent_id, k))
        bare_cpu.append((time.thread_time() - cpu) * 1000 / k)
    with CaptureQueriesContext(connection) as ctx:
        counted = loop.run_attention(agent_id, budget=k)
    statements = len(ctx.captured_queries) / max(1, counted.processed)
    m = statistics.median
    return LoopTimes(m(loops), m(bares), m(loop_cpu), m(bare_cpu), statements)


def _statements(fn: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    cap = options.get("n") or max(SIZES)
    sizes = [n for n in SIZES if n <= cap] or [cap]
    old = dict(settings.MARKUS)
    settings.MARKUS.update(LLM_PROVIDER="offline", DELIBERATION=False, WAKE_ON_ENQUEUE=False)
    user = get_user_model().objects.create_user(new_id("bench"))
    run_tag = new_id("s").replace("_", "")[-10:]
    agents = [
        agent_create(name=f"bench-scale-{i}", owner=user, agent_id=new_id("bench"))[0].id for i in range(max(AGENTS))
    ]
    one_row = agent_create(name="bench-scale-one", owner=user, agent_id=new_id("bench"))[0].id
    one_page = agent_create(name="bench-scale-page", owner=user, agent_id=new_id("bench"))[0].id
    everyone = [*agents, one_row, one_page]
    api = APIClient()
    api.force_authenticate(user)
    figures: list[Figure] = []
    smallest_sweep: float | None = None
    try:
        Agent.objects.filter(id__in=everyone).update(status=Agent.RunStatus.STOPPED)
        insert_queued([one_row], 1, f"{run_tag}one")
        insert_queued([one_page], PAGE, f"{run_tag}page")
        small_row, small_page = page_of(api, one_row, 1), page_of(api, one_page)
        stdout.write(
            f"scale/queue on {connection.vendor}: sizes {', '.join(map(str, sizes))} queued over "
            f"{' / '.join(map(str, AGENTS))} agents\n"
        )
        stdout.write(
            f"  {'queued':>7} {'agents':>6} {'insert s':>8} | {'read ms':>7} {'head ms':>7} {'x':>5} | "
            f"{'sweep ms':>8} {'x1k':>5} {'stmts':>5} | {'page ms':>7} {'1row ms':>7} {'x':>5} {'stmts':>5} | "
            f"{'loop ms/item':>12} {'bare ms':>7} {'bare/loop':>9} {'stmts/item':>10} {'cpu b/l':>7}\n"
        )
        for n in sizes:
            for a in AGENTS:
                active = agents[:a]
                first = active[0]
                Agent.objects.filter(id__in=active).update(status=Agent.RunStatus.RUNNING)
                began = time.perf_counter()
                insert_queued(active, n, f"{run_tag}{n}x{a}")
                inserted_s = time.perf_counter() - began
                try:
                    read, head = paired_ms(partial(loop.read_queue, first), bare_head(first), READS)
                    sweep = p50_ms(sweep_counted(), SWEEPS, warmup=1)
                    sweep_statements = _statements(sweep_counted())
                    if smallest_sweep is None:
                        smallest_sweep = sweep
                    page, one = paired_ms(page_of(api, first), small_page, PAGES)
                    page_statements = _statements(page_of(api, first))
                    row, one_row_ms = paired_ms(page_of(api, first, 1), small_row, PAGES)
                    k = min(LOOP_ITEMS, max(1, (n // a - 1) // (2 * LOOP_ROUNDS + 1)))
                    with quiet_wakeups():
                        loop.run_attention(first, budget=1)  # warm: the statements made once per connection
                        times = loop_per_item(first, k)
                        loop_ms, per_item, bare_ms = times.loop_ms, times.statements, times.bare_ms
                finally:
                    Agent.objects.filter(id__in=active).update(status=Agent.RunStatus.STOPPED)
                    delete_items(active)
                stdout.write(
                    f"  {n:>7} {a:>6} {inserted_s:>8.1f} | {read:>7.2f} {head:>7.2f} {read / head:>5.1f} | "
                    f"{sweep:>8.2f} {sweep / smallest_sweep:>5.1f} {sweep_statements:>5} | "
                    f"{page:>7.2f} {one:>7.2f} {page / one:>5.2f} {page_statements:>5} "
                    f"{row:>6.2f} {one_row_ms:>6.2f} {row / one_row_ms:>5.2f} | "
                    f"{loop_ms:>12.2f} {bare_ms:>7.2f} {bare_ms / loop_ms:>9.3f} {per_item:>10.1f} "
                    f"{times.bare_cpu_ms / times.loop_cpu_ms:>7.3f}\n"
                )
                where = f"{n} queued, {a} agent{'s' if a > 1 else ''}"
                figures += [
                    Figure(
                        SUITE,
                        f"loop throughput / bare claim+complete, {where}",
                        bare_ms / loop_ms,
                        "x",
                        baseline=f"loop {loop_ms:.2f} ms/item ({per_item:.1f} statements) vs bare {bare_ms:.3f} ms/item"
                        f", {k} items of the same queue, median of {LOOP_ROUNDS} rounds",
                        goal=0.1,
                    ),
                    *(
                        [
                            Figure(
                                SUITE,
                                f"loop CPU / bare claim+complete CPU, {where}",
                                times.bare_cpu_ms / times.loop_cpu_ms,
                                "x",
                                baseline=f"loop {times.loop_cpu_ms:.2f} ms of this thread's CPU an item vs bare "
                                f"{times.bare_cpu_ms:.3f} ms a pair (SQLite: the database's work in it), {k} items, "
                                f"median of {LOOP_ROUNDS} rounds",
                            )
                        ]
                        if connection.vendor == "sqlite"
                        else []
                    ),
                    Figure(
                        SUITE,
                        f"queue read / bare head SELECT, {where}",
                        read / head,
                        "x",
                        baseline=f"read {read:.2f} ms vs bare head SELECT {head:.2f} ms",
                        better="lower",
                    ),
                    Figure(
                        SUITE,
                        f"sweep / sweep at {sizes[0]} queued 1 agent, {where}",
                        sweep / smallest_sweep,
                        "x",
                        baseline=f"sweep {sweep:.2f} ms ({sweep_statements} statements) vs {smallest_sweep:.2f} ms",
                        better="lower",
                    ),
                    Figure(
                        SUITE,
                        f"timeline first page / a one-page timeline's, {where}",
                        page / one,
                        "x",
                        baseline=f"first page of {PAGE} {page:.2f} ms ({page_statements} statements) vs the same "
                        f"request to an agent with {PAGE} rows {one:.2f} ms",
                        goal=1.2,
                        better="lower",
                    ),
                    Figure(
                        SUITE,
                        f"timeline one-row page / a one-row timeline's, {where}",
                        row / one_row_ms,
                        "x",
                        baseline=f"limit=1 {row:.2f} ms vs the same request to an agent with one row "
                        f"{one_row_ms:.2f} ms",
                        goal=1.2,
                        better="lower",
                    ),
                ]
        return figures
    finally:
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        delete_items(everyone)
        Agent.objects.filter(id__in=everyone).delete()
        user.delete()
