"""Timeline benchmark: the mailbox timeline endpoint of an agent with 100,000 history
rows, page by page, by ``offset`` and by the ``before`` cursor; baseline in the same
run: the bare keyset SELECT of a page on the same table.

Steps:
1. A throwaway user and agent (external, stopped: no worker or sweep touches it) and N
   handled items, one second apart, each with a decision and an activity, bulk
   inserted. On PostgreSQL the three tables are then vacuumed and analysed, as
   autovacuum would after such an insert (it sets the visibility map that index-only
   scans need, and the planner's statistics).
2. For each page (the first; a middle one at N/2; a deep one at 0.9 N), by ``offset``
   and by ``before`` (the id of the item just above the page): REPS requests through
   the real URL, view and serialisation (Django's test client, in this process), after
   WARMUP unmeasured ones; p50 and p99 of each, and the SQL statements of one request.
3. The mind view's "Load earlier" page at the deep position, by cursor (informative: most of
   it is rendering 30 items of HTML; the goal is the API's).
4. Baseline: the bare keyset SELECT of 50 rows (the same columns, order and index) at
   the first and the deep position; and, as the framework's floor, the agent's detail
   endpoint (authentication, the agent's row, one small JSON answer) in the same run.
5. Delete the agent, its rows and the user, whatever happened.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from attention.models import AgentActivity, AgentDecision, DecisionType
from mailbox.models import MailboxItem
from mailbox.registry import ActivityType, MailboxType, Status
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import new_id

from .report import Figure, timings_ms

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "timeline"
DEFAULT_N = 100_000
LIMIT = 50
WARMUP = 5
REPS = 40
BATCH = 5000
GOAL_MS = 20.0
TYPES = (MailboxType.HEARTBEAT, MailboxType.SYSTEM_EVENT, MailboxType.HUMAN_CHAT, MailboxType.TASK_COMMENT)
TABLES = (MailboxItem._meta.db_table, AgentDecision._meta.db_table, AgentActivity._meta.db_table)

_COLUMNS = ", ".join(f.column for f in MailboxItem._meta.concrete_fields)
FIRST_SQL = f"SELECT {_COLUMNS} FROM {TABLES[0]} WHERE agent_id = %s ORDER BY queued_at DESC, id DESC LIMIT {LIMIT}"
KEYSET_SQL = (
    f"SELECT {_COLUMNS} FROM {TABLES[0]} WHERE agent_id = %s AND queued_at <= %s AND (queued_at < %s OR id < %s)"
    f" ORDER BY queued_at DESC, id DESC LIMIT {LIMIT}"
)


def build(agent_id: str, n: int) -> list[str]:
    """N handled items, newest last, each with a decision and an activity; their ids
    newest first (the timeline's order)."""
    start = timezone.now() - timedelta(seconds=n + 60)
    ids: list[str] = []
    for first in range(0, n, BATCH):
        items = MailboxItem.objects.bulk_create(
            MailboxItem(
                agent_id=agent_id,
                source_type=TYPES[i % len(TYPES)],
                status=Status.COMPLETED,
                payload={"summary": f"bench item {i}", "content": f"bench content {i}"},
                queued_at=start + timedelta(seconds=i),
                started_at=start + timedelta(seconds=i),
                completed_at=start + timedelta(seconds=i, milliseconds=500),
            )
            for i in range(first, min(first + BATCH, n))
        )
        AgentDecision.objects.bulk_create(
            AgentDecision(
                agent_id=agent_id,
                mailbox_item=item,
                decision_type=DecisionType.PICK,
                reasoning="Idle — picked from queue",
                created_at=item.queued_at,
            )
            for item in items
        )
        AgentActivity.objects.bulk_create(
            AgentActivity(
                agent_id=agent_id,
                mailbox_item=item,
                type=ActivityType.HEARTBEAT.value,
                label=item.summary,
                started_at=item.queued_at,
                ended_at=item.completed_at,
                total_tokens=1200,
            )
            for item in items
        )
        ids.extend(item.id for item in items)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in TABLES:
                cursor.execute(f"VACUUM (ANALYZE) {table}")
    return ids[::-1]


def _timed(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    """p50 and p99 in milliseconds of ``reps`` calls, after WARMUP unmeasured ones."""
    times = timings_ms(fn, reps, warmup=WARMUP)
    return statistics.median(times), statistics.quantiles(times, n=100, method="inclusive")[98]


def _statements(fn: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as queries:
        fn()
    return len(queries)


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    n = options.get("n") or DEFAULT_N
    reps = options.get("reps") or REPS
    user = get_user_model().objects.create_user(new_id("bench"))
    agent, _ = agent_create(name="bench", kind=Agent.Kind.EXTERNAL, owner=user, agent_id=new_id("bench"))
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    browser = Client()
    try:
        began = time.perf_counter()
        ids = build(agent.id, n)
        took = time.perf_counter() - began
        stdout.write(f"timeline benchmark on {connection.vendor}: {n} history rows built in {took:.1f} s\n")
        api = APIClient()
        api.force_authenticate(user)
        browser.force_login(user)
        url = f"/api/agents/{agent.id}/mailbox"
        positions = {"first": 0, "middle": n // 2, "deep": n * 9 // 10}

        def page(params: dict[str, Any], expect: str) -> Callable[[], Any]:
            """The request of one page (timed bare), checked once here: the page must
            start where it should (a server that ignored ``before`` would not)."""

            def get() -> Any:
                return api.get(url, {"limit": LIMIT, **params})

            response = get()
            body = response.json()
            if response.status_code != 200 or body["history"][0]["id"] != expect:
                raise RuntimeError(f"bench: {params} answered {response.status_code} {str(body)[:200]}")
            return get

        cursor_supported = "nextCursor" in api.get(url, {"limit": 1}).json()
        rows: list[tuple[str, str, Callable[[], object]]] = []
        for name, at in positions.items():
            rows.append((name, "offset", page({"offset": at} if at else {}, ids[at])))
            if cursor_supported and at:
                rows.append((name, "before", page({"before": ids[at - 1]}, ids[at])))
        if not cursor_supported:
            stdout.write("  the endpoint has no cursor (no nextCursor in its answer): by-before pages skipped\n")

        deep = positions["deep"]
        anchor = MailboxItem.objects.get(id=ids[deep - 1])
        ops = connection.ops
        keyset_args = [
            agent.id,
            ops.adapt_datetimefield_value(anchor.queued_at),
            ops.adapt_datetimefield_value(anchor.queued_at),
            anchor.id,
        ]

        def bare(sql: str, args: list[Any]) -> Callable[[], object]:
            def select() -> object:
                with connection.cursor() as cursor:
                    cursor.execute(sql, args)
                    return cursor.fetchall()

            return select

        def floor() -> object:
            response = api.get(f"/api/agents/{agent.id}/")
            if response.status_code != 200:
                raise RuntimeError(f"bench: the agent's detail answered {response.status_code}")
            return response

        bare_first = _timed(bare(FIRST_SQL, [agent.id]), reps)
        bare_deep = _timed(bare(KEYSET_SQL, keyset_args), reps)
        framework = _timed(floor, reps)
        baseline = (
            f"bare keyset SELECT of {LIMIT} rows p50 {bare_first[0]:.2f} ms (first) / {bare_deep[0]:.2f} ms (deep);"
            f" the agent's detail endpoint p50 {framework[0]:.2f} ms"
        )

        figures: list[Figure] = []
        stdout.write(f"  {'page':<8} {'by':<7} {'position':>9} {'p50 ms':>8} {'p99 ms':>8} {'statements':>10}\n")
        for name, by, get in rows:
            p50, p99 = _timed(get, reps)
            count = _statements(get)
            stdout.write(f"  {name:<8} {by:<7} {positions[name]:>9} {p50:>8.2f} {p99:>8.2f} {count:>10}\n")
            label = f"{name} page ({positions[name]}) by {by}" if positions[name] else "first page"
            figures.append(Figure(SUITE, f"{label} p50", p50, "ms", baseline, GOAL_MS, "lower"))

        if cursor_supported:
            mind_url = f"/agents/{agent.id}/mind/timeline/"

            def earlier() -> object:
                response = browser.get(mind_url, {"before": ids[deep - 1]})
                if response.status_code != 200 or ids[deep].encode() not in response.content:
                    raise RuntimeError(f"bench: mind view Load earlier answered {response.status_code}")
                return response

            p50, p99 = _timed(earlier, reps)
            stdout.write(f"  {'mind':<8} {'before':<7} {deep:>9} {p50:>8.2f} {p99:>8.2f} {_statements(earlier):>10}\n")
            figures.append(
                Figure(SUITE, f"mind view Load earlier ({deep}) by before p50 (30 items, HTML)", p50, "ms", baseline)
            )
        stdout.write(
            f"  {'agent':<8} {'detail':<7} {'':>9} {framework[0]:>8.2f} {framework[1]:>8.2f} {_statements(floor):>10}"
            "   (the framework's floor: a small answer about the same agent)\n"
        )
        stdout.write(f"  {'bare':<8} {'keyset':<7} {0:>9} {bare_first[0]:>8.2f} {bare_first[1]:>8.2f} {1:>10}\n")
        stdout.write(f"  {'bare':<8} {'keyset':<7} {deep:>9} {bare_deep[0]:>8.2f} {bare_deep[1]:>8.2f} {1:>10}\n")
        return figures
    finally:
        browser.logout()
        with connection.cursor() as cursor:  # raw: the ORM would collect 100,000 rows per table first
            for table in (TABLES[2], TABLES[1], TABLES[0]):
                cursor.execute(f"DELETE FROM {table} WHERE agent_id = %s", [agent.id])
        agent.delete()
        user.delete()
