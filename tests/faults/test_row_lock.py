"""Scenario 3: a frozen session (a psycopg connection holding SELECT … FOR UPDATE on
one agent's agent_attention row in an open transaction) while the other agents work.
Their progress must be at least 90 % of a control run without the lock (ARCHITECTURE
decision 11: a frozen worker stalls only its own agent).

Both runs post the same steady stream of system events to every agent, the locked
agent included (each one a wake-up for it, and the sweep adds one every period: a
worker that waits for the lock without limit loses a thread to each), and count the
other agents' items completed by a few seconds after the last one was posted."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from .figures import assert_invariants, collect, completions, open_work, settle
from .harness import Api, Cluster, LoadGenerator, boot, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

EVENTS_PER_AGENT = 8
SPREAD = 10.0  # seconds over which a run's events are posted
TAIL = 4.0  # and then this long to finish


def run(api: Api, agents: list[str], others: list[str], tag: str) -> tuple[int, int]:
    """Post the stream; (the other agents' completions, the first agent's) by its end."""
    requests = []
    for n in range(EVENTS_PER_AGENT):
        for agent in agents:
            text = f"{tag} event {n} for {agent}"
            body = {"sourceType": "system_event", "payload": {"summary": text, "content": text}}
            requests.append((f"/api/agents/{agent}/mailbox", body))
    start = timezone.now()
    load = LoadGenerator(api, requests, SPREAD).start()
    time.sleep(SPREAD + TAIL)
    load.join()
    assert not load.errors, load.errors[:5]
    # Only the run's own events: anything else an agent completes (a heartbeat, should
    # its tick come) would count as progress the locked run lacks.
    prefix = f"{tag} event "
    return completions(others, start, summary_prefix=prefix), completions(agents[:1], start, summary_prefix=prefix)


def test_a_row_lock_held_by_a_frozen_session_stalls_only_its_agent(cluster: Cluster, report, clock):
    seeded = boot(cluster)
    api = Api(cluster.base, seeded.token)
    victim, others = seeded.agents[0], seeded.agents[1:]

    control, _ = run(api, seeded.agents, others, "control")
    wait_until(lambda: open_work()[0] == 0, timeout=60, what="the control run to finish")

    with cluster.pg.connect(cluster.db_name) as frozen:
        frozen.autocommit = False
        frozen.execute("SELECT * FROM agent_attention WHERE agent_id = %s FOR UPDATE", (victim,)).fetchall()
        locked, victim_done = run(api, seeded.agents, others, "locked")
        frozen.rollback()
    ratio = locked / max(1, control)

    settled = settle(90)
    want = EVENTS_PER_AGENT * len(others)
    figures = collect(others=f"{100 * ratio:.0f}%({locked}_vs_control_{control}_of_{want}_in_{SPREAD + TAIL:.0f}s)")
    figures.extra = f"locked_agent_done_while_locked={victim_done}"
    report(figures.line("3 row-lock", clock()))
    assert ratio >= 0.9, f"the other agents made {100 * ratio:.0f}% of the control run's progress ({figures.others})"
    assert_invariants(figures, settled)
