"""Scenario 2: SIGSTOP a worker past its lease, then SIGCONT; then freeze the other
worker while one of its database sessions is inside a transaction (idle in
transaction, found in pg_stat_activity by the worker's application_name), past the
lease again, and SIGCONT. A frozen worker that wakes up must write nothing over its
successor (fencing), and its agents' work must not be lost."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

import pytest
from django.utils import timezone

from .figures import assert_invariants, backlog, collect, completions, settle
from .harness import LEASE_SECONDS, Api, Cluster, LoadGenerator, Plan, boot, leased_by, requests_for, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

FROZEN_FOR = 2 * LEASE_SECONDS
IDLE_IN_TRANSACTION_S = 5.0


HELD = """
    SELECT a.pid, coalesce(string_agg(DISTINCT c.relname, ',') FILTER (WHERE c.relname IS NOT NULL), '')
    FROM pg_stat_activity a
    LEFT JOIN pg_locks l ON l.pid = a.pid AND l.granted
    LEFT JOIN pg_class c ON c.oid = l.relation AND c.relkind = 'r' AND c.relname NOT LIKE 'pg_%%'
    WHERE a.application_name = %s AND a.state = 'idle in transaction'
    GROUP BY a.pid
"""
# Sessions waiting for a lock that a session of the frozen process holds, by statement.
BLOCKED = """
    SELECT w.application_name, left(regexp_replace(w.query, '\\s+', ' ', 'g'), 80)
    FROM pg_stat_activity w
    WHERE w.datname = current_database() AND EXISTS (
        SELECT 1 FROM pg_stat_activity f
        WHERE f.application_name = %s AND f.pid = ANY(pg_blocking_pids(w.pid)))
"""
TABLE = re.compile(r'(?:UPDATE|FROM|INTO)\s+"?(\w+)"?', re.I)


def freeze_in_transaction(cluster: Cluster, name: str, within: float = 15.0) -> tuple[str, list[int]]:
    """SIGSTOP ``name`` at a moment one of its sessions is idle in transaction (the
    worker is between two statements of a transaction). Prefers a transaction that
    holds an agent_attention lock (a fenced write). Returns the tables it holds locks
    on ("no_txn" when it could not land inside one in time) and the sessions' pids."""
    proc = cluster.procs[name]
    deadline = time.monotonic() + within
    with cluster.pg.connect(cluster.db_name) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(HELD, (f"faults-{name}",)).fetchall()
            want_attention = time.monotonic() < deadline - within / 2
            if rows and (not want_attention or any("agent_attention" in r[1] for r in rows)):
                proc.signal(signal.SIGSTOP)
                again = conn.execute(HELD, (f"faults-{name}",)).fetchall()
                if again:
                    tables = sorted({t for r in again for t in r[1].split(",") if t})
                    return "txn[" + "+".join(tables) + "]", [r[0] for r in again]
                proc.signal(signal.SIGCONT)
            time.sleep(0.002)
    proc.signal(signal.SIGSTOP)  # could not land inside one: freeze anyway
    return "no_txn", []


def blocked_on(cluster: Cluster, name: str) -> Counter:
    """Other sessions waiting on a lock the frozen ``name`` holds: (process, table) → n."""
    rows = cluster.sql(BLOCKED, f"faults-{name}")
    return Counter(
        f"{app.removeprefix('faults-')}:{m.group(1) if (m := TABLE.search(q)) else q[:20]}" for app, q in rows
    )


def lease_epochs(agents: list[str]) -> dict[str, int]:
    from attention.models import AgentAttention

    return dict(AgentAttention.objects.filter(agent_id__in=agents).values_list("agent_id", "lease_epoch"))


def test_sigstop_a_worker_past_its_lease_then_inside_a_transaction(cluster, report, clock):
    # PostgreSQL cuts a session idle in a transaction this long (decision 11), within the
    # freeze: the frozen worker's locks go, and it finds its session gone when it wakes.
    cluster.extra_env["MARKUS_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS"] = str(int(IDLE_IN_TRANSACTION_S * 1000))
    seeded = boot(cluster)
    plan = Plan()
    load = LoadGenerator(Api(cluster.base, seeded.token), requests_for(seeded.agents, plan), plan.seconds).start()
    progress = []

    # 1. Frozen while it holds leases with items in flight (anywhere in its code).
    time.sleep(1.5)
    w1 = cluster.procs["w1"]
    leased = wait_until(lambda: leased_by(w1.pid), timeout=20, interval=0.05, what="w1 in flight")
    stopped_at = timezone.now()
    w1.signal(signal.SIGSTOP)
    epochs = lease_epochs(leased)
    others = [a for a in seeded.agents if a not in leased]
    time.sleep(FROZEN_FOR)
    progress.append(f"{completions(others, stopped_at, timezone.now())}done+{backlog(others)}left")

    def taken_over() -> int:  # a successor took the lease of one of its agents
        moved = lease_epochs(leased)
        return sum(1 for a in leased if moved[a] > epochs[a])

    wait_until(taken_over, timeout=20, interval=0.2, what="a successor to take over an agent of the frozen worker")
    frozen1 = f"{taken_over()}/{len(leased)}ag"
    w1.signal(signal.SIGCONT)
    time.sleep(1.5)

    # 2. Frozen between two statements of a transaction (ideally a fenced one).
    w2 = cluster.procs["w2"]
    landed, sessions = freeze_in_transaction(cluster, "w2")
    stopped_at = timezone.now()
    leased = leased_by(w2.pid, in_flight=False)
    others = [a for a in seeded.agents if a not in leased]
    blocked: Counter = Counter()
    for _ in range(4):  # who waits for the frozen transaction's locks (the most seen at once)
        time.sleep(FROZEN_FOR / 4)
        blocked |= blocked_on(cluster, "w2")
    progress.append(f"{completions(others, stopped_at, timezone.now())}done+{backlog(others)}left")
    alive = cluster.sql("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", sessions)
    cut = "n/a" if not sessions else "yes" if not alive else "no"
    w2.signal(signal.SIGCONT)

    load.join()
    settled = settle(90)
    figures = collect(others=f"[{','.join(progress)}]other_agents_in_{FROZEN_FOR:.0f}s_frozen")
    figures.extra = (
        f"frozen1_taken_over={frozen1} frozen2_in={landed} frozen2_session_cut={cut} "
        f"blocked_on_frozen2={sum(blocked.values())}({','.join(f'{k}x{n}' for k, n in sorted(blocked.items()))}) "
        f"requests={load.sent} request_errors={len(load.errors)}"
    )
    report(figures.line("2 sigstop-worker", clock()))
    assert not load.errors, load.errors[:5]
    assert_invariants(figures, settled)
