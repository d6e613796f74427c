"""Attention benchmark: items per second through the whole loop (lease, claim, pick
decision, activity, offline brain, tool loop, completion, main-session line, events)
on one real Celery worker; database statements per item; enqueue-to-start latency
(median, p99). Baseline in the same run: the bare claim + complete SQL of the mailbox
benchmark on the same table, so the ratio says what the loop costs per item over the
queue alone.

Steps:
1. A throwaway internal agent; the coalescing window is set to 0 (it is a deliberate
   200 ms pause that would only measure itself).
2. Throughput: enqueue N heartbeat-free system events with wake-ups muted, then wake
   the agent once and time until all are completed by the worker.
3. Statements: run the loop in this thread for a few items under CaptureQueriesContext.
4. Latency: M times, enqueue one item (wake-up on commit) and wait for it; latency is
   started_at - queued_at of the stored row.
5. Baseline: bare SQL enqueue + claim + complete of N rows.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention import loop, services
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import new_id

from .mailbox import bare_dequeue, bare_enqueue, quiet_wakeups

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

DEFAULT_N = 200
LATENCY_SAMPLES = 40


def _enqueue(agent_id: str, i: int) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=MailboxType.SYSTEM_EVENT,
        payload={"summary": f"bench {i}", "content": f"bench content {i}"},
    )


def _wait_all_done(agent_id: str, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while MailboxItem.objects.filter(agent_id=agent_id, status=Status.COMPLETED).count() < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not finish in time")
        time.sleep(0.02)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> None:
    from markus.celery import app
    from markus.embedded import start_worker_thread

    n = options.get("n") or DEFAULT_N
    old = dict(settings.MARKUS)
    settings.MARKUS.update(COALESCE_WINDOW_MS=0, WAKE_ON_ENQUEUE=True, LLM_PROVIDER="offline")
    agent, _ = agent_create(name="bench", agent_id=new_id("bench"))
    worker = None
    try:
        if not settings.REDIS_URL:
            worker, _thread = start_worker_thread(app, concurrency=1)
        else:
            stdout.write("REDIS_URL is set: start one `celery -A markus worker -c 1` for this benchmark")
        # 2. throughput
        with quiet_wakeups():
            for i in range(n):
                _enqueue(agent.id, i)
        t0 = time.perf_counter()
        services.wake(agent.id)
        _wait_all_done(agent.id, n)
        loop_rate = n / (time.perf_counter() - t0)
        # 3. statements per item, this thread
        Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.PAUSED)
        k = 20
        with quiet_wakeups():
            for i in range(k):
                _enqueue(agent.id, n + i)
        Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.RUNNING)
        with CaptureQueriesContext(connection) as ctx:
            loop.run_attention(agent.id, budget=k)
        statements = len(ctx.captured_queries) / k
        # 4. latency
        latencies: list[float] = []
        for i in range(LATENCY_SAMPLES):
            item = _enqueue(agent.id, n + k + i)
            deadline = time.monotonic() + 30
            while True:
                row = MailboxItem.objects.get(id=item.id)
                if row.started_at is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.002)
            if row.started_at is None:
                raise RuntimeError("the worker did not start an item within 30 s")
            latencies.append((row.started_at - row.queued_at).total_seconds() * 1000)
            _wait_all_done(agent.id, n + k + i + 1)
        # 5. baseline
        base_agent, _ = agent_create(name="bench-bare", agent_id=new_id("bench"), kind=Agent.Kind.EXTERNAL)
        bare_enqueue(base_agent.id, n)
        t0 = time.perf_counter()
        bare_dequeue(base_agent.id)
        bare_rate = n / (time.perf_counter() - t0)
        base_agent.delete()
    finally:
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        if worker is not None:
            worker.stop(in_sighandler=False)
        agent.delete()
    stdout.write(f"attention benchmark on {connection.vendor}, offline brain, one worker, N={n}")
    stdout.write(f"  loop throughput       {loop_rate:10.1f} items/s")
    stdout.write(f"  bare claim+complete   {bare_rate:10.1f} items/s   (baseline, same run)")
    stdout.write(f"  ratio loop/bare       {loop_rate / bare_rate:10.3f}")
    stdout.write(f"  statements per item   {statements:10.1f}")
    stdout.write(
        f"  enqueue-to-start ms   median {statistics.median(latencies):.1f}   p99 "
        f"{_percentile(latencies, 0.99):.1f}   (n={len(latencies)})"
    )
