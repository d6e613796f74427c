"""Scenarios 8 and 9: kill -9 of a worker in the middle of a deliberation (tier-2
triage), and in the middle of a batch a deliberation chose.

A deliberation claims nothing: the items it deliberates over stay queued, its state is
``deciding`` and its ``internal`` activity "Deliberation: …" is open on no item. When
its worker dies, the lease runs out, the sweep hands the agent to the surviving worker,
and the run that takes the lease must close the dead deliberation's activity (failed)
and leave ``deciding``, although no item was in flight. A batch is claimed together: its
items are re-queued together by recovery and completed together, in one transaction,
exactly once each, none alone before the kill.

The counts come from the records and from a trigger that logs every status change of a
mailbox item (``deliberating.TRANSITIONS``)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.utils import timezone

from .deliberating import (
    DeliberatingLLM,
    InFlight,
    completed_not_once,
    completions_per_item,
    deliberation_in_flight,
    enqueue_events,
    install_transition_log,
    transitions,
    unfenced,
    use_stub,
)
from .figures import assert_invariants, collect, settle
from .harness import Cluster, boot, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

AGENTS = 2
EVENTS = 4  # per agent: over the backlog threshold (2), so the agents deliberate
KILLS = 3


def start(cluster: Cluster, stub: DeliberatingLLM) -> list[str]:
    use_stub(cluster, stub.start())
    install_transition_log(cluster)
    seeded = boot(cluster, agents=AGENTS, server=False)
    return seeded.agents


def dropped_in_flight(not_once: dict[str, int]) -> set[str]:
    """Of the items never completed, those recovery dropped as in flight on a dead worker."""
    from mailbox.models import MailboxItem

    never = [i for i, n in not_once.items() if n == 0]
    rows = MailboxItem.objects.filter(id__in=never, status="dropped", drop_reason__startswith="recovery: in flight")
    return set(rows.values_list("id", flat=True))


def closed_state(agent_id: str) -> tuple[str, bool]:
    from attention.models import AgentAttention

    row = AgentAttention.objects.get(agent_id=agent_id)
    return row.state, bool(row.lease_owner)


def test_kill_9_mid_deliberation(cluster, report, clock):
    """Three kills, each of the worker deliberating (restarted after each)."""
    stub = DeliberatingLLM(deliberate_s=2.0)
    victims: list[InFlight] = []
    try:
        agents = start(cluster, stub)
        items = enqueue_events(agents, EVENTS + 2)  # enough deliberations for three kills
        for _ in range(KILLS):
            victim = wait_until(
                lambda: deliberation_in_flight(cluster), timeout=30, interval=0.05, what="a deliberation"
            )
            cluster.kill(victim.worker)
            victims.append(victim)
            cluster.start_worker(victim.worker)
            cluster.wait_workers(victim.worker)
        settled = settle(60)
    finally:
        stub.stop()
    from attention.models import AgentActivity, AgentActivityLog

    dead = list(AgentActivity.objects.filter(id__in=[v.activity_id for v in victims]))
    left_open = [a.id for a in dead if a.ended_at is None or a.success is not False]
    lost_lines = AgentActivityLog.objects.filter(activity__in=dead, content__startswith="worker lost").count()
    log = transitions(cluster)
    not_once = completed_not_once(log, items)
    # A kill takes down everything its worker runs: an item of another agent it was
    # processing then (not deliberating) is dropped with recovery's recorded reason, the
    # rule for an item nobody awaits (mailbox.lifecycle.recover_in_flight), not lost.
    collateral = dropped_in_flight(not_once)
    not_once = {i: n for i, n in not_once.items() if i not in collateral}
    states = {a: closed_state(a) for a in agents}
    still_open = AgentActivity.objects.filter(ended_at__isnull=True).count()
    fence = unfenced(cluster, log)
    figures = collect(others=f"deliberations={stub.calls['deliberation']}")
    figures.extra = (
        f"kills={len(victims)}({','.join(f'{v.worker}@{v.agent_id}:{v.epoch}' for v in victims)}) "
        f"dead_deliberations_left_open={len(left_open)}/{len(dead)} worker_lost_lines={lost_lines} "
        f"completed_not_once={len(not_once)} dropped_beside_a_killed_deliberation={len(collateral)} "
        f"open_activities={still_open} unfenced_transitions={len(fence)} "
        f"states={','.join(f'{a}:{s}' for a, (s, _) in sorted(states.items()))}"
    )
    report(figures.line("8 kill-9-mid-deliberation", clock()))
    assert not fence, fence[:5]
    assert not not_once, f"items not completed exactly once: {not_once}"
    assert_invariants(figures, settled)
    assert not left_open, f"dead deliberations left open (or not failed): {left_open}"
    assert lost_lines == len(victims)
    assert still_open == 0
    assert all(state == "idle" and not held for state, held in states.values()), states


def batch_in_flight(cluster: Cluster, agents: list[str]) -> tuple[str, list[str]] | None:
    """(worker, items) of a batch in flight whose items never crashed before."""
    from attention.models import AgentAttention
    from mailbox.models import MailboxItem

    for agent in agents:
        busy = list(MailboxItem.objects.filter(agent_id=agent, status="processing").values_list("id", "marks"))
        lead = next((i for i, m in busy if (m or {}).get("batch")), None)
        if lead is None or len(busy) < 2 or any((m or {}).get("crashes") for _, m in busy):
            continue
        owner = AgentAttention.objects.get(agent_id=agent).lease_owner
        for name in ("w1", "w2"):
            if f":{cluster.procs[name].pid}:" in owner:
                return name, [i for i, _ in busy]
    return None


def _completions(cluster: Cluster, ids: list[str]) -> list[int]:
    done = completions_per_item(transitions(cluster))
    return [done.get(i, 0) for i in ids]


def test_kill_9_mid_batch(cluster, report, clock):
    """Two kills, each in a batch of another agent (a batch killed twice is dropped as
    a poison pill by design: MAX_RECOVERY_ATTEMPTS)."""
    stub = DeliberatingLLM(deliberate_s=0.3, batch=True, batch_work_s=2.5)
    kills: list[tuple[str, list[str], set[str], datetime]] = []
    items: dict[str, list[str]] = {}
    try:
        agents = start(cluster, stub)
        for agent in agents:  # one agent's burst after the other: one batch to kill each time
            items.update(enqueue_events([agent], EVENTS))
            worker, batched = wait_until(
                lambda agent=agent: batch_in_flight(cluster, [agent]), timeout=30, interval=0.05, what="a batch"
            )
            before = {i for i, n in completions_per_item(transitions(cluster)).items() if n}
            kills.append((worker, batched, before, timezone.now()))
            cluster.kill(worker)
            cluster.start_worker(worker)
            cluster.wait_workers(worker)
            # The next kill must not find this batch in flight again on its worker (a
            # second crash would drop it as a poison pill): it finishes first.
            wait_until(
                lambda batched=batched: all(n == 1 for n in _completions(cluster, batched)),
                timeout=60,
                interval=0.2,
                what="the killed batch to complete after its recovery",
            )
        settled = settle(60)
    finally:
        stub.stop()
    log = transitions(cluster)
    not_once = completed_not_once(log, items)
    alone, apart, not_together = [], [], []
    for _, batched, before, killed_at in kills:
        alone += sorted(set(batched) & before)
        alone += [t.item_id for t in log if t.item_id in batched and t.new == "completed" and t.at < killed_at]
        # Completed together: in one transaction, after the kill.
        if len({t.txid for t in log if t.item_id in batched and t.new == "completed"}) != 1:
            apart.append(batched[0])
        requeued = {t.item_id for t in log if t.item_id in batched and (t.old, t.new) == ("processing", "queued")}
        if requeued != set(batched):
            not_together.append(f"{sorted(requeued)} of {sorted(batched)}")
    fence = unfenced(cluster, log)
    figures = collect(others=f"deliberations={stub.calls['deliberation']},batch_turns={stub.calls['batch_work']}")
    figures.extra = (
        f"kills={len(kills)} batches={'+'.join(str(len(b)) for _, b, _, _ in kills)}items "
        f"requeued_apart={len(not_together)} completed_alone_before_kill={len(alone)} "
        f"batches_completed_apart={len(apart)} completed_not_once={len(not_once)} "
        f"unfenced_transitions={len(fence)}"
    )
    report(figures.line("9 kill-9-mid-batch", clock()))
    assert not fence, fence[:5]
    assert not alone, f"batch items completed before the kill: {alone}"
    assert not not_once, f"items not completed exactly once: {not_once}"
    assert not not_together, f"batches not re-queued together: {not_together}"
    assert not apart, f"batches not completed in one transaction: {apart}"
    assert_invariants(figures, settled)


def set_status(agent_id: str, status: str) -> None:
    """What pause and resume write (attention.services._set_status), without the
    wake-up this process would send to another broker: the cluster's sweep wakes."""
    from attention.models import AgentAttention
    from markus.agents.models import Agent

    Agent.objects.filter(id=agent_id).update(status=status)
    AgentAttention.objects.filter(agent_id=agent_id).update(cancel_requested=status != "running")


def test_kill_9_mid_deliberation_then_pause(cluster, report, clock):
    """Scenario 8b: the worker deliberating is killed and its agent paused at once. No run
    may take a paused agent's lease, so the sweep tidies up after the dead worker: the
    deliberation closed (failed, "worker lost"), the state idle, nothing processed while
    paused; after the resume every item is completed once."""
    from attention.models import AgentActivity, AgentActivityLog

    stub = DeliberatingLLM(deliberate_s=3.0)
    try:
        agents = start(cluster, stub)
        items = enqueue_events(agents, EVENTS)
        victim = wait_until(lambda: deliberation_in_flight(cluster), timeout=30, interval=0.05, what="a deliberation")
        cluster.kill(victim.worker)
        set_status(victim.agent_id, "paused")
        paused_at = timezone.now()
        cluster.start_worker(victim.worker)

        def tidied() -> bool:
            activity = AgentActivity.objects.get(id=victim.activity_id)
            return activity.ended_at is not None and closed_state(victim.agent_id) == ("idle", False)

        wait_until(tidied, timeout=30, interval=0.1, what="the sweep to tidy the paused agent's dead deliberation")
        tidied_after = (timezone.now() - paused_at).total_seconds()
        time.sleep(3)  # a few sweeps more: still nothing for the paused agent
        log = transitions(cluster)
        while_paused = [
            t
            for t in log
            if t.agent_id == victim.agent_id and t.at > paused_at and t.new in ("processing", "completed")
        ]
        set_status(victim.agent_id, "running")
        settled = settle(60)
    finally:
        stub.stop()
    dead = AgentActivity.objects.get(id=victim.activity_id)
    lost_lines = AgentActivityLog.objects.filter(activity=dead, content__startswith="worker lost").count()
    log = transitions(cluster)
    not_once = completed_not_once(log, items)
    fence = unfenced(cluster, log)
    figures = collect(others=f"deliberations={stub.calls['deliberation']}")
    figures.extra = (
        f"killed={victim.worker}@{victim.agent_id}:{victim.epoch} tidied_{tidied_after:.1f}s_after_the_pause "
        f"dead_deliberation_closed={dead.ended_at is not None}(success={dead.success}) worker_lost_lines={lost_lines} "
        f"processed_while_paused={len(while_paused)} completed_not_once={len(not_once)} "
        f"unfenced_transitions={len(fence)}"
    )
    report(figures.line("8b kill-9-mid-deliberation-then-pause", clock()))
    assert not fence, fence[:5]
    assert dead.success is False and lost_lines == 1
    assert not while_paused, while_paused[:5]
    assert not not_once, f"items not completed exactly once: {not_once}"
    assert_invariants(figures, settled)
