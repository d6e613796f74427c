"""Scenario 1: kill -9 of a worker under load, restart it, kill the other one, restart
it, kill the first again. Every kill lands while the victim has an item in flight; the
leases it held expire, the sweep hands its agents to the surviving worker, whose
recovery re-queues (or, for what nobody waits for, drops with a reason) the dead
worker's items."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from .figures import assert_invariants, backlog, collect, completions, settle
from .harness import Api, LoadGenerator, Plan, boot, leased_by, requests_for, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]


def test_repeated_kill_9_of_a_worker_under_load(cluster, report, clock):
    seeded = boot(cluster)
    plan = Plan()
    load = LoadGenerator(Api(cluster.base, seeded.token), requests_for(seeded.agents, plan), plan.seconds).start()
    progress = []
    for victim in ("w1", "w2", "w1"):
        time.sleep(1.0)
        pid = cluster.procs[victim].pid
        leased = wait_until(lambda pid=pid: leased_by(pid), timeout=20, interval=0.05, what=f"{victim} in flight")
        killed_at = timezone.now()
        cluster.kill(victim)
        others = [a for a in seeded.agents if a not in leased]
        cluster.start_worker(victim)
        time.sleep(4.0)
        progress.append(f"{completions(others, killed_at, timezone.now())}done+{backlog(others)}left")
        cluster.wait_workers(victim)  # back before the next kill
    load.join()
    settled = settle(90)
    figures = collect(others=f"[{','.join(progress)}]other_agents_in_4s_after_each_kill")
    figures.extra = f"kills=3 requests={load.sent} request_errors={len(load.errors)}"
    report(figures.line("1 kill-9-worker", clock()))
    assert not load.errors, load.errors[:5]
    assert_invariants(figures, settled)
