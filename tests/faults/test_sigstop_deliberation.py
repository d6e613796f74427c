"""Scenario 10: SIGSTOP a worker in the middle of a deliberation, past its lease, then
SIGCONT it once a successor has taken the agent over.

The frozen worker's LLM call (the stub's slow deliberation) has its answer waiting when
it wakes: a ``complete_deliberation``. Nothing it does then may land: no claim, no
decision, no activity or log line, no transition of an item; its deliberation's plan
is never applied (no ``deliberate`` decision of its epoch, none applied twice), and its
open deliberation activity is closed (failed) by the successor's recovery."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
from django.utils import timezone

from .deliberating import (
    DeliberatingLLM,
    completed_not_once,
    deliberation_in_flight,
    enqueue_events,
    install_transition_log,
    transitions,
    unfenced,
    use_stub,
)
from .figures import assert_invariants, collect, settle
from .harness import boot, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

AGENTS = 2
EVENTS = 4
REFUSED = ("during a deliberation", "is no longer current", "no longer ours")


def epoch_of(agent_id: str) -> int:
    from attention.models import AgentAttention

    return int(AgentAttention.objects.filter(agent_id=agent_id).values_list("lease_epoch", flat=True).get())


def test_sigstop_mid_deliberation_past_the_lease(cluster, report, clock):
    from attention.models import AgentActivity, AgentActivityLog, AgentDecision

    stub = DeliberatingLLM(deliberate_s=2.0)
    try:
        use_stub(cluster, stub.start())
        install_transition_log(cluster)
        agents = boot(cluster, agents=AGENTS, server=False).agents
        items = enqueue_events(agents, EVENTS)
        victim = wait_until(lambda: deliberation_in_flight(cluster), timeout=30, interval=0.05, what="a deliberation")
        frozen = cluster.procs[victim.worker]
        frozen.signal(signal.SIGSTOP)
        stopped_at = timezone.now()
        wait_until(
            lambda: epoch_of(victim.agent_id) > victim.epoch,
            timeout=30,
            interval=0.1,
            what="a successor to take the lease over",
        )
        taken_at = timezone.now()
        time.sleep(0.5)  # the successor is at work (deliberating again) when the frozen one wakes
        resumed_at = timezone.now()
        frozen.signal(signal.SIGCONT)
        settled = settle(60)
    finally:
        stub.stop()
    log = transitions(cluster)
    not_once = completed_not_once(log, items)
    fence = unfenced(cluster, log)
    app = f"faults-{victim.worker}"
    late_transitions = [t for t in log if t.app == app and t.agent_id == victim.agent_id and t.at > taken_at]
    late_decisions = AgentDecision.objects.filter(
        agent_id=victim.agent_id, lease_epoch=victim.epoch, created_at__gt=taken_at
    ).count()
    late_activities = AgentActivity.objects.filter(
        agent_id=victim.agent_id, lease_epoch=victim.epoch, created_at__gt=taken_at
    ).count()
    late_logs = (
        AgentActivityLog.objects.filter(
            activity__agent_id=victim.agent_id, activity__lease_epoch=victim.epoch, created_at__gt=taken_at
        )
        .exclude(content__startswith="worker lost")
        .count()
    )
    deliberate = list(
        AgentDecision.objects.filter(decision_type="deliberate").values_list("lease_epoch", "context", "agent_id")
    )
    applied = Counter((ctx or {}).get("activityId") for _, ctx, _ in deliberate if (ctx or {}).get("activityId"))
    applied_twice = sorted(a for a, n in applied.items() if n > 1)
    frozen_plans = [ctx for epoch, ctx, agent in deliberate if agent == victim.agent_id and epoch == victim.epoch]
    dead = AgentActivity.objects.get(id=victim.activity_id)
    text = frozen.log.read_text(errors="replace")
    refused = sum(text.count(marker) for marker in REFUSED)
    figures = collect(others=f"deliberations={stub.calls['deliberation']}")
    figures.extra = (
        f"frozen={victim.worker}@epoch{victim.epoch} frozen_for={(resumed_at - stopped_at).total_seconds():.1f}s "
        f"late_writes(transitions={len(late_transitions)},decisions={late_decisions},activities={late_activities},"
        f"logs={late_logs}) refused_by_fence={refused} frozen_plans_applied={len(frozen_plans)} "
        f"plans_applied_twice={len(applied_twice)} frozen_deliberation_closed={dead.ended_at is not None}"
        f"(success={dead.success}) completed_not_once={len(not_once)} unfenced_transitions={len(fence)}"
    )
    report(figures.line("10 sigstop-mid-deliberation", clock()))
    assert not fence, fence[:5]
    assert not late_transitions and not late_decisions and not late_activities and not late_logs
    assert refused >= 1, "the frozen worker never met the fence after it woke"
    assert not frozen_plans, f"the frozen worker's deliberation was applied: {frozen_plans}"
    assert not applied_twice, f"plans applied twice: {applied_twice}"
    assert not not_once, f"items not completed exactly once: {not_once}"
    assert dead.ended_at is not None and dead.success is False
    assert_invariants(figures, settled)
