"""The dream cycle (issue 16, deliverable 4), with frozen time: the beat's check
enqueues a memory_consolidation item for an agent with at least 50 new observations,
once a day (every 6 hours with 500 or more), at most 3 agents dreaming at once across
the cluster; the dream runs through the mailbox and the real loop, and the offline
brain consolidates deterministically."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection

from attention import loop, tasks
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.llm.base import set_provider_override
from markus.memory import selectors
from markus.memory.dream import dream_check
from markus.memory.models import MemoryState, Observation

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def observe(agent_id: str, n: int, text: str = "observation {i}") -> None:
    Observation.objects.bulk_create(Observation(agent_id=agent_id, content=text.format(i=i)) for i in range(n))


def dreams(agent_id: str | None = None) -> list[MailboxItem]:
    rows = MailboxItem.objects.filter(source_type=T.MEMORY_CONSOLIDATION)
    return list(rows.filter(agent_id=agent_id) if agent_id else rows)


def finish_dreams() -> None:
    MailboxItem.objects.filter(source_type=T.MEMORY_CONSOLIDATION).update(status=Status.COMPLETED)


@pytest.fixture
def clock():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.mark.django_db
def test_49_new_observations_are_not_enough_50_are(agent, clock):
    observe(agent.id, 49)
    assert dream_check() == 0
    observe(agent.id, 1)
    assert dream_check() == 1
    (item,) = dreams(agent.id)
    assert item.status == Status.QUEUED and item.priority == 4
    assert item.extra["newObservations"] == 50 and item.extra["listed"] == 50
    assert item.extra["throughObservation"] == Observation.objects.filter(agent=agent).order_by("-id")[0].id
    assert "[obs " in item.content and "memory_consolidate" in item.content
    assert dream_check() == 0, "an open dream is not doubled"


@pytest.mark.django_db
def test_an_agent_dreams_once_a_day(agent, clock):
    observe(agent.id, 60)
    assert dream_check() == 1
    finish_dreams()  # a dream that consolidated nothing: the observations are still new
    for hours in (4, 8, 12, 16, 20, 23):
        clock.move_to(T0 + timedelta(hours=hours))
        assert dream_check() == 0, hours
    clock.move_to(T0 + timedelta(hours=24))
    assert dream_check() == 1
    assert len(dreams(agent.id)) == 2


@pytest.mark.django_db
def test_a_dream_its_worker_died_in_does_not_count_as_the_days_dream(agent, clock):
    """Recovery drops a dream in flight at a crash (nothing waits for it): the agent
    dreams again at the next check, not a day later."""
    observe(agent.id, 60)
    assert dream_check() == 1
    MailboxItem.objects.filter(source_type=T.MEMORY_CONSOLIDATION).update(
        status=Status.DROPPED, drop_reason="recovery: in flight at 2 crashes"
    )
    clock.move_to(T0 + timedelta(hours=4))
    assert dream_check() == 1
    assert [d.status for d in dreams(agent.id)].count(Status.QUEUED) == 1


@pytest.mark.django_db
def test_a_beat_a_few_minutes_early_still_counts_as_the_next_day(agent, clock):
    observe(agent.id, 50)
    dream_check()
    finish_dreams()
    clock.move_to(T0 + timedelta(hours=23, minutes=55))
    assert dream_check() == 1


@pytest.mark.django_db
def test_with_500_new_observations_an_agent_dreams_every_6_hours(agent, grace, clock):
    observe(agent.id, 500)
    observe(grace.id, 499)
    assert dream_check() == 2
    finish_dreams()
    clock.move_to(T0 + timedelta(hours=4))
    assert dream_check() == 0
    clock.move_to(T0 + timedelta(hours=6))
    assert dream_check() == 1
    assert [d.agent_id for d in dreams() if d.status == Status.QUEUED] == [agent.id]
    # The busy agent's dream lists what fits, in order; the rest waits for the next.
    item = dreams(agent.id)[-1]
    assert 0 < item.extra["listed"] < 500 and "more (they come in your next dream)" in item.content


@pytest.mark.django_db
def test_consolidated_observations_are_no_longer_new(agent, clock):
    observe(agent.id, 50)
    dream_check()
    MemoryState.objects.create(agent=agent, consolidated_through=Observation.objects.order_by("-id")[0].id)
    finish_dreams()
    clock.move_to(T0 + timedelta(days=2))
    assert dream_check() == 0
    observe(agent.id, 50)
    assert dream_check() == 1


@pytest.mark.django_db
def test_at_most_3_agents_dream_at_once(alice, clock):
    crew = [agent_create(name=f"A{i}", owner=alice, agent_id=f"a{i}")[0] for i in range(5)]
    for i, a in enumerate(crew):
        observe(a.id, 50 + i)
    assert dream_check() == 3
    assert sorted(d.agent_id for d in dreams()) == ["a2", "a3", "a4"], "the most new observations first"
    assert dream_check() == 0
    MailboxItem.objects.filter(agent_id="a4", source_type=T.MEMORY_CONSOLIDATION).update(status=Status.PROCESSING)
    MailboxItem.objects.filter(agent_id="a3", source_type=T.MEMORY_CONSOLIDATION).update(status=Status.COMPLETED)
    assert dream_check() == 1
    assert len(dreams()) == 4
    # A stopped agent's queued dream holds no place.
    Agent.objects.filter(id="a2").update(status=Agent.RunStatus.STOPPED)
    assert dream_check() == 1
    assert {d.agent_id for d in dreams()} == {"a0", "a1", "a2", "a3", "a4"}


@pytest.mark.django_db(transaction=True)
def test_the_beat_task_runs_the_check(agent, clock):
    observe(agent.id, 50)
    assert tasks.dream_cycle_all() == 1
    assert tasks.dream_cycle_all() == 0


@pytest.mark.pg
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_beats_at_once_never_pass_the_cap(alice):
    # Routed by its marker (`postgres`: only the PostgreSQL pass runs it): never skipped.
    assert connection.vendor == "postgresql", "real concurrent transactions need PostgreSQL"
    crew = [agent_create(name=f"B{i}", owner=alice, agent_id=f"b{i}")[0] for i in range(9)]
    for a in crew:
        observe(a.id, 50)
    for _ in range(3):
        barrier = threading.Barrier(4)
        results: list[int] = []

        def beat(barrier: threading.Barrier = barrier, results: list[int] = results) -> None:
            try:
                barrier.wait()
                results.append(dream_check())
            finally:
                connection.close()

        threads = [threading.Thread(target=beat) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        open_dreams = MailboxItem.objects.filter(
            source_type=T.MEMORY_CONSOLIDATION, status__in=[Status.QUEUED, Status.PROCESSING]
        )
        assert open_dreams.count() == 3, results
        assert len(set(open_dreams.values_list("agent_id", flat=True))) == 3
        finish_dreams()
    assert len(dreams()) == 9, "every agent dreamt once; nobody twice"


@pytest.fixture
def offline_brain(settings, monkeypatch):
    set_provider_override(None)
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")


@pytest.mark.pg
@pytest.mark.django_db
def test_a_dream_through_the_real_loop_with_the_offline_brain(agent, offline_brain, clock):
    Observation.objects.bulk_create(
        [Observation(agent=agent, content="Deploys need an approval from Bob.") for _ in range(6)]
        + [Observation(agent=agent, content="deploys need an approval from bob") for _ in range(2)]
        + [Observation(agent=agent, content="The build runs with make test") for _ in range(3)]
        + [Observation(agent=agent, content=f"one-off note {i}") for i in range(40)]
    )
    assert dream_check() == 1
    loop.run_attention(agent.id)
    (item,) = dreams(agent.id)
    assert item.status == Status.COMPLETED
    doc = {s.title: s.content for s in selectors.document(agent.id)}
    assert doc["Recurring observations"] == "- Deploys need an approval from Bob.\n- The build runs with make test"
    approvals = Observation.objects.get(agent=agent, content="Deploys need an approval from Bob.")
    assert approvals.count == 8
    assert Observation.objects.filter(agent=agent).count() == 42
    assert selectors.new_observations(agent.id).count() == 0
    state = MemoryState.objects.get(agent=agent)
    assert (state.dreams, state.consolidated_at) == (1, T0)
    from attention.models import AgentActivity

    activity = AgentActivity.objects.get(mailbox_item=item)
    assert activity.success and activity.total_tools == 1

    # The next day's dream (50 more, the approval seen again) promotes nothing twice.
    clock.move_to(T0 + timedelta(days=1))
    observe(agent.id, 48, "another note {i}")
    observe(agent.id, 2, "Deploys need an approval from Bob")
    assert dream_check() == 1
    loop.run_attention(agent.id)
    doc = {s.title: s.content for s in selectors.document(agent.id)}
    assert doc["Recurring observations"] == "- Deploys need an approval from Bob.\n- The build runs with make test"
    assert Observation.objects.get(agent=agent, content="Deploys need an approval from Bob").count == 2
