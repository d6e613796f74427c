"""Periodic jobs are idempotent per period (issue 11, item 5): two beats (a second
scheduler, a retried task) must not give an agent two heartbeats. Since issue 16 the
heartbeat's period is each agent's own (tests/attention/test_heartbeat*.py): the beat's
tick (``attention.heartbeat.heartbeat_tick``) claims it by compare-and-set. The daily
report and the dream are asked only of the agents that are due, once per period: the
same counts for them, twice and concurrently, are in tests/reports and tests/memory."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from attention import heartbeat, tasks
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.agents.services import agent_create

T = MailboxType


@pytest.fixture
def crew(alice):
    """Three running internal agents, a paused one and an external harness (neither
    of the last two gets heartbeats)."""
    agents = [agent_create(name=n, owner=alice, agent_id=n.lower())[0] for n in ("Ada", "Grace", "Linus")]
    paused, _ = agent_create(name="Sleepy", owner=alice, agent_id="sleepy")
    Agent.objects.filter(id=paused.id).update(status=Agent.RunStatus.PAUSED)
    agent_create(name="Cli", owner=alice, agent_id="cli", kind=Agent.Kind.EXTERNAL)
    return [a.id for a in agents]


def heartbeats_per_agent_and_period() -> Counter:
    rows = MailboxItem.objects.filter(source_type=T.HEARTBEAT).values_list("agent_id", "payload")
    return Counter((agent_id, (payload.get("extra") or {}).get("period")) for agent_id, payload in rows)


@pytest.mark.django_db
def test_the_tick_twice_gives_one_heartbeat_per_agent_and_period(crew):
    assert heartbeat.heartbeat_tick() == len(crew)
    assert heartbeat.heartbeat_tick() == 0
    counts = heartbeats_per_agent_and_period()
    assert sorted(agent for agent, _ in counts) == sorted(crew)
    assert set(counts.values()) == {1}
    assert all(period for _, period in counts), "every item carries its period"


@pytest.mark.django_db
def test_the_period_is_the_agents_own_slot(crew):
    """A fresh agent is due at once; its period names it and the slot's start."""
    now = timezone.now()
    heartbeat.heartbeat_tick(now)
    for beat in MailboxItem.objects.filter(source_type=T.HEARTBEAT):
        assert beat.extra["period"] == f"{beat.agent_id}:{now:%Y-%m-%dT%H:%M:%SZ}"


@pytest.mark.django_db(transaction=True)
def test_the_celery_beat_tasks_are_idempotent_too(crew):
    """The beat's heartbeat task twice gives one heartbeat per agent; the report and
    dream tasks ask nothing of agents that are not due (no manager, no observations)."""
    for _ in range(2):
        tasks.heartbeat_all()
        tasks.daily_report_all()
        tasks.dream_cycle_all()
    assert MailboxItem.objects.filter(source_type=T.HEARTBEAT).count() == len(crew)
    assert not MailboxItem.objects.filter(source_type__in=[T.DAILY_REPORT, T.MEMORY_CONSOLIDATION]).exists()


@pytest.mark.django_db
def test_two_beats_a_few_milliseconds_apart_still_give_one_heartbeat(crew):
    now = timezone.now()
    assert heartbeat.heartbeat_tick(now - timedelta(milliseconds=40)) == len(crew)
    assert heartbeat.heartbeat_tick(now + timedelta(milliseconds=40)) == 0
    assert MailboxItem.objects.filter(source_type=T.HEARTBEAT).count() == len(crew)


@pytest.mark.django_db
def test_the_next_period_gets_its_own_heartbeat(crew):
    now = timezone.now()
    heartbeat.heartbeat_tick(now)
    later = now + timedelta(minutes=heartbeat.DEFAULT_MINUTES)
    # The first heartbeats are still queued: the next period passes without a second
    # (at most one heartbeat open per agent) …
    assert heartbeat.heartbeat_tick(later) == 0
    # … and once they are handled, the period after gets its own, once.
    MailboxItem.objects.filter(source_type=T.HEARTBEAT).update(status=Status.COMPLETED)
    after = later + timedelta(minutes=heartbeat.DEFAULT_MINUTES)
    assert heartbeat.heartbeat_tick(after) == len(crew)
    assert heartbeat.heartbeat_tick(after) == 0
    counts = heartbeats_per_agent_and_period()
    assert len(counts) == 2 * len(crew) and set(counts.values()) == {1}
    queued = Counter(
        MailboxItem.objects.filter(source_type=T.HEARTBEAT, status=Status.QUEUED).values_list("agent_id", flat=True)
    )
    assert set(queued.values()) == {1}


@pytest.mark.pg
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_ticks_from_several_threads_at_once_give_one_heartbeat_per_agent_and_period(crew):
    beats, errors = 6, []
    start = threading.Barrier(beats)
    now = timezone.now()

    def beat() -> None:
        try:
            start.wait(timeout=30)
            heartbeat.heartbeat_tick(now)
        except Exception as exc:  # reported by the test, not lost in a thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(beats)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and errors == []
    counts = heartbeats_per_agent_and_period()
    print(f"\nheartbeats per agent and period {dict(counts)}")
    assert sorted(agent for agent, _ in counts) == sorted(crew)
    assert set(counts.values()) == {1}, f"heartbeats per agent and period: {dict(counts)}"
