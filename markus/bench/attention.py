"""Attention benchmark: items per second through the whole loop (lease, claim, pick
decision, activity, offline brain, tool loop, completion, main-session line, events)
on one real Celery worker; database statements per item; enqueue-to-start latency
(median, p99). Baseline in the same run: the bare claim + complete SQL of the mailbox
benchmark on the same table, so the ratio says what the loop costs per item over the
queue alone.

Steps:
1. A throwaway internal agent, the offline brain, the default loop settings (the
   coalescing window included: it delays only an item a follow-up could fold into).
   One worker: in a thread of this process on the embedded broker, or, when
   ``REDIS_URL`` is set, a ``celery worker -c 1`` subprocess this benchmark starts and
   stops (same environment, so the same database, broker and namespace).
2. Throughput: enqueue N system events with wake-ups muted, then wake the agent once
   and time until all are completed by the worker (its run re-sends itself every
   ``RUN_BUDGET_ITEMS`` items, as in production).
3. Statements: K items through one run of the loop in this thread under
   CaptureQueriesContext; statements per item = all of the run's statements / K (and,
   for the detail lines, one run of a single item).
   Steps 2 and 3 run twice: with the deliberation off (tier 0 and 1, the figures with
   goals) and with the defaults, where each item taken from a backlog of two or more is
   deliberated first (an LLM session of its own; informative figures): the N items are
   of one priority, so each head has rivals (tier 0 would take a head more urgent than
   the rest at once, as in step 6).
4. Latency: M times, enqueue one item (the wake-up sent on commit) and wait for it;
   latency is started_at - queued_at of the stored row.
5. Baseline: bare SQL enqueue + claim + complete of N rows.
6. A standard burst through a real provider path, with the defaults (deliberation on):
   the ``openai`` provider against a local model stub (``model_stub``) that counts its
   calls by kind. ``BURSTS`` times, four system events arrive at once
   (``BURST_PRIORITIES``: one of priority 1 over lower ones) and one run of the loop in
   this thread takes them; items per second, and LLM calls per item (all, and those
   that only choose: deliberations and mini triages).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attention import loop, services
from attention.models import AgentAttention
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Priority, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import new_id

from .mailbox import bare_dequeue, bare_enqueue, quiet_wakeups
from .model_stub import ModelStub
from .report import Figure, percentile
from .workers import start_worker

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "attention"
DEFAULT_N = 200
STATEMENT_ITEMS = 20
LATENCY_SAMPLES = 40
WARMUP = 5
BURSTS = 25
# A standard burst: a priority-1 item over lower ones, arriving at once.
BURST_PRIORITIES = (Priority.HIGH, Priority.NORMAL, Priority.LOW, Priority.LOW)


def _enqueue(agent_id: str, i: int, priority: int | None = None) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=MailboxType.SYSTEM_EVENT,
        payload={"summary": f"bench {i}", "content": f"bench content {i}"},
        priority=priority,
    )


def _bursts(bursts: int) -> tuple[float, int, Counter[str], int]:
    """Step 6: ``bursts`` standard bursts through the openai SDK against the model stub,
    each taken by one run of the loop in this thread. Returns items/s, items, the stub's
    calls by kind, and the runs' statements (enqueues not counted)."""
    agent, _ = agent_create(name="bench-burst", agent_id=new_id("bench"))
    old = dict(settings.MARKUS)
    items = statements = 0
    try:
        with ModelStub() as stub:
            settings.MARKUS.update(
                LLM_PROVIDER="openai", LLM_BASE_URL=stub.url, LLM_API_KEY="sk-bench", LLM_MODEL="bench-stub"
            )
            t0 = time.perf_counter()
            for b in range(bursts):
                with quiet_wakeups():
                    for priority in BURST_PRIORITIES:
                        _enqueue(agent.id, items, int(priority))
                        items += 1
                with CaptureQueriesContext(connection) as ctx:
                    result = loop.run_attention(agent.id, budget=len(BURST_PRIORITIES))
                statements += len(ctx.captured_queries)
                if result.processed != len(BURST_PRIORITIES):
                    raise RuntimeError(f"burst {b}: the run processed {result.processed} items ({result.status})")
            rate = items / (time.perf_counter() - t0)
            calls = Counter(stub.calls)
    finally:
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
        agent.delete()
    return rate, items, calls, statements


def _wait_all_done(agent_id: str, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while MailboxItem.objects.filter(agent_id=agent_id, status=Status.COMPLETED).count() < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not finish {n} items in {timeout:.0f} s")
        time.sleep(0.01)


def _start_worker(stdout: SupportsWrite[str]) -> Callable[[], None]:
    """One worker for the benchmark; returns how to stop it."""
    from markus.celery import app

    return start_worker(stdout, app=app, module="markus", name="bench-attention")


def _statements(agent_id: str, k: int, first: int) -> tuple[int, loop.RunResult]:
    """Statements of one run of the loop over k queued items, in this thread."""
    Agent.objects.filter(id=agent_id).update(status=Agent.RunStatus.PAUSED)
    # Let the worker's trailing runs (a budget re-send, a late wake-up) end: paused, they
    # find the agent inactive and leave the items to this run.
    deadline = time.monotonic() + 30
    while (
        AgentAttention.objects.filter(agent_id=agent_id, lease_expires_at__gt=timezone.now())
        .exclude(lease_owner="")
        .exists()
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    time.sleep(0.3)
    with quiet_wakeups():
        for i in range(k):
            _enqueue(agent_id, first + i)
    Agent.objects.filter(id=agent_id).update(status=Agent.RunStatus.RUNNING)
    deadline = time.monotonic() + 30
    while True:  # the worker may still hold the lease for a moment (its last empty run)
        with CaptureQueriesContext(connection) as ctx:
            result = loop.run_attention(agent_id, budget=k)
        if result.status != "busy" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if result.processed != k:
        raise RuntimeError(f"the measured run processed {result.processed} of {k} items ({result.status})")
    return len(ctx.captured_queries), result


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    n = options.get("n") or DEFAULT_N
    old = dict(settings.MARKUS)
    settings.MARKUS.update(WAKE_ON_ENQUEUE=True, LLM_PROVIDER="offline")
    agent, _ = agent_create(name="bench", agent_id=new_id("bench"))
    stop = None
    done = 0
    try:
        stdout.write(f"attention benchmark on {connection.vendor}, offline brain, one worker, N={n}\n")
        stop = _start_worker(stdout)
        # 1. warm-up (and, for a worker subprocess, wait until it consumes)
        with quiet_wakeups():
            for i in range(WARMUP):
                _enqueue(agent.id, i)
        services.wake(agent.id)
        done += WARMUP
        _wait_all_done(agent.id, done, timeout=120)
        # 2. throughput, 3. statements per item (this thread): with the defaults, where
        # every item taken from a backlog of two or more of one priority is deliberated
        # first (tier 2),
        # and with the deliberation off (tier 0 and the mini triage's tier 1 only).
        measured: dict[bool, tuple[float, int, float]] = {}
        for deliberating in (False, True):
            settings.MARKUS["DELIBERATION"] = deliberating
            with quiet_wakeups():
                for i in range(n):
                    _enqueue(agent.id, done + i)
            t0 = time.perf_counter()
            services.wake(agent.id)
            done += n
            _wait_all_done(agent.id, done)
            rate = n / (time.perf_counter() - t0)
            single, _ = _statements(agent.id, 1, done)
            done += 1
            many, _ = _statements(agent.id, STATEMENT_ITEMS, done)
            done += STATEMENT_ITEMS
            measured[deliberating] = (rate, single, many / STATEMENT_ITEMS)
        settings.MARKUS["DELIBERATION"] = old.get("DELIBERATION", True)
        loop_rate, single, per_item = measured[False]
        deliberating_rate, _, deliberating_per_item = measured[True]
        many = round(per_item * STATEMENT_ITEMS)
        # 4. latency, with the wake-up on commit as in production
        latencies: list[float] = []
        for i in range(LATENCY_SAMPLES):
            item = _enqueue(agent.id, done + i)
            deadline = time.monotonic() + 30
            while True:
                row = MailboxItem.objects.get(id=item.id)
                if row.started_at is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.002)
            if row.started_at is None:
                raise RuntimeError("the worker did not start an item within 30 s")
            latencies.append((row.started_at - row.queued_at).total_seconds() * 1000)
            _wait_all_done(agent.id, done + i + 1)
        # 5. baseline
        base_agent, _ = agent_create(name="bench-bare", agent_id=new_id("bench"), kind=Agent.Kind.EXTERNAL)
        try:
            bare_enqueue(base_agent.id, n)
            t0 = time.perf_counter()
            bare_dequeue(base_agent.id)
            bare_rate = n / (time.perf_counter() - t0)
        finally:
            base_agent.delete()
    finally:
        Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
        if stop is not None:
            stop()
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        agent.delete()
    # 6. a standard burst through the openai SDK, the defaults (after the worker stopped)
    bursts = max(1, n // 8) if options.get("n") else BURSTS
    burst_rate, burst_items, calls, burst_statements = _bursts(bursts)
    ratio = loop_rate / bare_rate
    deliberating_ratio = deliberating_rate / bare_rate
    burst_ratio = burst_rate / bare_rate
    llm_per_item = sum(calls.values()) / burst_items
    choosing_per_item = (calls["deliberation"] + calls["triage"]) / burst_items
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    stdout.write(f"  loop throughput       {loop_rate:10.1f} items/s\n")
    stdout.write(f"  bare claim+complete   {bare_rate:10.1f} items/s   (baseline, same run)\n")
    stdout.write(f"  ratio loop/bare       {ratio:10.3f}\n")
    stdout.write(
        f"  statements per item   {per_item:10.1f}   "
        f"(one run of {STATEMENT_ITEMS} items: {many}; of one item: {single})\n"
    )
    stdout.write(
        f"  deliberating: loop     {deliberating_rate:10.1f} items/s, ratio {deliberating_ratio:.3f}, "
        f"{deliberating_per_item:.1f} statements per item "
        "(a deliberation before each item of a backlog of one priority)\n"
    )
    stdout.write(f"  enqueue-to-start ms   median {p50:.1f}   p99 {p99:.1f}   (n={len(latencies)})\n")
    stdout.write(
        f"  burst via openai SDK  {burst_rate:10.1f} items/s, ratio {burst_ratio:.3f}, "
        f"{llm_per_item:.2f} LLM calls per item ({calls['deliberation']} deliberations, "
        f"{calls['triage']} mini triages, {calls['item']} item runs for {burst_items} items in "
        f"{bursts} bursts of priorities {'/'.join(str(int(p)) for p in BURST_PRIORITIES)}), "
        f"{burst_statements / burst_items:.1f} statements per item\n"
    )
    return [
        Figure(
            SUITE,
            "loop throughput / bare claim+complete",
            ratio,
            "x",
            baseline=f"loop {loop_rate:.0f}/s vs bare claim+complete SQL {bare_rate:.0f}/s (deliberation off)",
            goal=0.1,
        ),
        Figure(
            SUITE,
            "statements per item",
            per_item,
            "",
            baseline=f"one run of {STATEMENT_ITEMS} items, offline brain, deliberation off "
            f"({single} for a run of one item)",
            goal=20,
            better="lower",
        ),
        Figure(
            SUITE,
            "loop throughput / bare, deliberating",
            deliberating_ratio,
            "x",
            baseline=f"loop {deliberating_rate:.0f}/s, the defaults: "
            "every item of a backlog of one priority deliberated first",
        ),
        Figure(
            SUITE,
            "statements per item, deliberating",
            deliberating_per_item,
            "",
            baseline=f"one run of {STATEMENT_ITEMS} items, the defaults (a deliberation, an LLM session, per item)",
            better="lower",
        ),
        Figure(
            SUITE,
            "loop throughput / bare, standard burst via openai SDK",
            burst_ratio,
            "x",
            baseline=f"loop {burst_rate:.0f}/s, the defaults, {bursts} bursts of priorities "
            f"{'/'.join(str(int(p)) for p in BURST_PRIORITIES)} against a local model stub",
        ),
        Figure(
            SUITE,
            "LLM calls per item, standard burst",
            llm_per_item,
            "",
            baseline=f"{calls['deliberation']} deliberations + {calls['triage']} mini triages + "
            f"{calls['item']} item runs for {burst_items} items (one call each)",
            better="lower",
        ),
        Figure(
            SUITE,
            "statements per item, standard burst",
            burst_statements / burst_items,
            "",
            baseline=f"the runs of {bursts} bursts, the defaults, openai SDK (enqueues not counted)",
            better="lower",
        ),
        Figure(
            SUITE,
            "choosing LLM calls per item, standard burst",
            choosing_per_item,
            "",
            baseline="deliberations and mini triages only (tier 0 makes none)",
            better="lower",
        ),
        Figure(
            SUITE,
            "enqueue -> processing start p50",
            p50,
            "ms",
            baseline=f"{len(latencies)} lone items, wake-up on commit, default settings",
            goal=10,
            better="lower",
        ),
        Figure(
            SUITE,
            "enqueue -> processing start p99",
            p99,
            "ms",
            baseline=f"{len(latencies)} lone items, wake-up on commit, default settings",
            goal=50,
            better="lower",
        ),
    ]
