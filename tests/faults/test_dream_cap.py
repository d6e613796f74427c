"""Scenario 11: the dream cycle's cluster-wide cap under racing beat ticks and a killed
worker.

Five agents have enough new observations to dream; at most 3 may dream at once
(``DREAM_MAX_CONCURRENT``). Two beat ticks (``dream_check``, each on its own database
session) race again and again until every agent has dreamt; a worker is killed with
-9 in the middle of a dream. Never more than 3 agents dream at once (counted from the
dream items' lives: queued to completed), each agent dreams once, and every dream ends
completed: the killed one's is re-queued by the recovery of the run that takes its
agent over, and its place under the cap is held meanwhile (its item stays
``processing`` until then)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone

from .deliberating import DeliberatingLLM, Transition, install_transition_log, transitions, unfenced, use_stub
from .figures import assert_invariants, collect, settle
from .harness import boot

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

AGENTS = 5
CAP = 3
OBSERVATIONS = 3  # per agent: the threshold
QUIET_S = 3.0


def race_ticks(errors: list[str]) -> int:
    """Two dream_check calls at the same instant, each in its own thread (and database
    session); returns the dreams they enqueued."""
    from markus.memory.dream import dream_check

    barrier = threading.Barrier(2)
    enqueued: list[int] = []

    def tick() -> None:
        try:
            barrier.wait(timeout=10)
            enqueued.append(dream_check())
        except Exception as exc:  # counted: a tick must never fail
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=tick, name=f"faults-tick{n}") for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return sum(enqueued)


def dream_lives(log: list[Transition]) -> list[tuple[str, datetime, datetime]]:
    """(agent, queued, ended) of each dream item: from its enqueue to its end (completed
    or dropped, from the transition log); an open one has not ended (far in the future)."""
    from mailbox.models import MailboxItem

    ended = {t.item_id: t.at for t in log if t.new in ("completed", "dropped", "merged")}
    far = timezone.now() + timedelta(days=1)
    rows = MailboxItem.objects.filter(source_type="memory_consolidation").values_list("id", "agent_id", "queued_at")
    return [(agent, queued, ended.get(item_id, far)) for item_id, agent, queued in rows]


def most_at_once(lives: list[tuple[str, datetime, datetime]]) -> tuple[int, int]:
    """The most dreams open at one instant in the cluster, and for one agent."""
    events = sorted(
        [(q, 1, a) for a, q, _ in lives] + [(e, -1, a) for a, _, e in lives], key=lambda e: (e[0], e[1])
    )  # an end before a start at one instant
    most = now = 0
    per: Counter = Counter()
    most_one = 0
    for _, step, agent in events:
        now += step
        per[agent] += step
        most, most_one = max(most, now), max(most_one, per[agent])
    return most, most_one


def test_dream_cap_with_racing_ticks_and_a_kill(cluster, report, clock, monkeypatch):
    from mailbox.models import MailboxItem
    from markus.memory.models import Observation

    monkeypatch.setitem(settings.MARKUS, "DREAM_MIN_OBSERVATIONS", OBSERVATIONS)
    monkeypatch.setitem(settings.MARKUS, "DREAM_MAX_CONCURRENT", CAP)
    cluster.extra_env.update(
        MARKUS_DREAM_MIN_OBSERVATIONS=str(OBSERVATIONS), MARKUS_DREAM_MAX_CONCURRENT=str(CAP)
    )  # should beat's own tick fire meanwhile, it races too
    stub = DeliberatingLLM(deliberate_s=0.2, slow_if_offered={"memory_consolidate": 2.5})
    errors: list[str] = []
    ticks = enqueued = 0
    killed = ""
    quiet_since = 0.0
    try:
        use_stub(cluster, stub.start())
        install_transition_log(cluster)
        agents = boot(cluster, agents=AGENTS, server=False).agents
        Observation.objects.bulk_create(
            Observation(agent_id=a, content=f"{a} noticed thing {n}") for a in agents for n in range(OBSERVATIONS)
        )
        deadline = time.monotonic() + 45
        dreams = MailboxItem.objects.filter(source_type="memory_consolidation")
        while time.monotonic() < deadline:
            enqueued += race_ticks(errors)
            ticks += 2
            if not killed:
                from attention.models import AgentAttention

                busy = dreams.filter(status="processing").values_list("agent_id", flat=True)
                owners = AgentAttention.objects.filter(agent_id__in=list(busy)).values_list("lease_owner", flat=True)
                victim = next(
                    (n for n in ("w1", "w2") for o in owners if f":{cluster.procs[n].pid}:" in o),
                    None,
                )
                if victim is not None:
                    cluster.kill(victim)
                    killed = victim
            # Done when no dream has been open for a while after the kill (its place freed).
            if killed and not dreams.filter(status__in=["queued", "processing"]).exists():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > QUIET_S:
                    break
            else:
                quiet_since = 0.0
            time.sleep(0.3)
        settled = settle(60)
    finally:
        stub.stop()
    log = transitions(cluster)
    per_agent = Counter(dreams.values_list("agent_id", flat=True))
    completed = Counter(dreams.filter(status="completed").values_list("agent_id", flat=True))
    statuses = Counter(dreams.values_list("status", flat=True))
    dropped = list(dreams.filter(status="dropped").values_list("agent_id", "drop_reason"))
    most, most_one = most_at_once(dream_lives(log))
    fence = unfenced(cluster, log)
    figures = collect(others=f"dream_turns={stub.calls['slow']}")
    figures.extra = (
        f"ticks={ticks} dreams_enqueued={enqueued} most_dreaming_at_once={most}/{CAP} "
        f"most_open_per_agent={most_one} agents_dreamt={len(completed)}/{AGENTS} "
        f"max_completed_per_agent={max(completed.values(), default=0)} "
        f"dreams=({','.join(f'{s}:{n}' for s, n in sorted(statuses.items()))}) killed_mid_dream={killed or 'none'} "
        f"tick_errors={len(errors)} unfenced_transitions={len(fence)}"
    )
    report(figures.line("11 dream-cap", clock()))
    assert not errors, errors[:5]
    assert killed, "no dream was in flight to kill"
    assert most <= CAP, f"{most} agents dreamt at once (cap {CAP})"
    assert most_one == 1, "an agent had two dreams open at once"
    assert not fence, fence[:5]
    assert all(reason.startswith("recovery:") for _, reason in dropped), dropped
    # Every dream finished: the killed one's agent dreams again (its dream was dropped by
    # recovery, as anything in flight that nobody waits for), and no agent dreams twice.
    assert completed == Counter({a: 1 for a in per_agent}) and len(completed) == AGENTS, (
        f"dreams completed per agent {dict(completed)}; dropped {dropped}"
    )
    assert_invariants(figures, settled)
