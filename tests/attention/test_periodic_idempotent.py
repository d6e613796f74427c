"""Periodic jobs are idempotent per period (issue 11, item 5): two beats (a second
scheduler, a retried task) must not give an agent two heartbeats, two daily reports or
two dream cycles. Each item carries its schedule slot in ``payload.extra.period``. Since
issue 16 the heartbeat's period is each agent's own (tests/attention/test_heartbeat*.py)."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from attention import heartbeat, services, tasks
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.agents.services import agent_create

T = MailboxType
PERIODIC = [T.HEARTBEAT, T.DAILY_REPORT, T.MEMORY_CONSOLIDATION]


@pytest.fixture
def crew(alice):
    """Three running internal agents, a paused one and an external harness (neither
    of the last two gets periodic items)."""
    agents = [agent_create(name=n, owner=alice, agent_id=n.lower())[0] for n in ("Ada", "Grace", "Linus")]
    paused, _ = agent_create(name="Sleepy", owner=alice, agent_id="sleepy")
    Agent.objects.filter(id=paused.id).update(status=Agent.RunStatus.PAUSED)
    agent_create(name="Cli", owner=alice, agent_id="cli", kind=Agent.Kind.EXTERNAL)
    return [a.id for a in agents]


def items_per_agent_and_period(source_type) -> Counter:
    rows = MailboxItem.objects.filter(source_type=source_type).values_list("agent_id", "payload")
    return Counter((agent_id, (payload.get("extra") or {}).get("period")) for agent_id, payload in rows)


@pytest.mark.django_db
@pytest.mark.parametrize("source_type", PERIODIC, ids=str)
def test_the_periodic_job_twice_gives_one_item_per_agent_and_period(crew, source_type):
    assert services.enqueue_periodic(source_type) == len(crew)
    assert services.enqueue_periodic(source_type) == 0
    counts = items_per_agent_and_period(source_type)
    assert sorted(agent for agent, _ in counts) == sorted(crew)
    assert set(counts.values()) == {1}
    assert all(period for _, period in counts), "every item carries its period"


@pytest.mark.django_db
def test_the_periods_are_the_agents_heartbeat_slot_and_the_date(crew):
    """The heartbeat's period is the agent's own slot (issue 16: each agent has its own
    interval; a fresh agent is due at once), the others' the date."""
    now = timezone.now()
    services.enqueue_periodic(T.HEARTBEAT, now=now)
    services.enqueue_periodic(T.DAILY_REPORT, now=now)
    services.enqueue_periodic(T.MEMORY_CONSOLIDATION, now=now)
    for beat in MailboxItem.objects.filter(source_type=T.HEARTBEAT):
        assert beat.extra["period"] == f"{beat.agent_id}:{now:%Y-%m-%dT%H:%M:%SZ}"
    today = str(timezone.localdate(now))
    for source_type in (T.DAILY_REPORT, T.MEMORY_CONSOLIDATION):
        assert MailboxItem.objects.filter(source_type=source_type).first().extra["period"] == today


@pytest.mark.django_db(transaction=True)
def test_the_celery_beat_tasks_are_idempotent_too(crew):
    """The beat's heartbeat task twice gives one heartbeat per agent. (The daily report
    and the dream are asked only of the agents that are due: tests/reports and
    tests/memory count those, twice and concurrently.)"""
    for _ in range(2):
        tasks.heartbeat_all()
        tasks.daily_report_all()
        tasks.dream_cycle_all()
    assert MailboxItem.objects.filter(source_type=T.HEARTBEAT).count() == len(crew)
    assert not MailboxItem.objects.filter(source_type__in=[T.DAILY_REPORT, T.MEMORY_CONSOLIDATION]).exists()


@pytest.mark.django_db
def test_two_beats_a_few_milliseconds_apart_still_give_one_heartbeat(crew):
    now = timezone.now()
    assert services.enqueue_periodic(T.HEARTBEAT, now=now - timedelta(milliseconds=40)) == len(crew)
    assert services.enqueue_periodic(T.HEARTBEAT, now=now + timedelta(milliseconds=40)) == 0
    assert MailboxItem.objects.filter(source_type=T.HEARTBEAT).count() == len(crew)


@pytest.mark.django_db
def test_the_next_period_gets_its_own_item(crew):
    now = timezone.now()
    services.enqueue_periodic(T.HEARTBEAT, now=now)
    later = now + timedelta(minutes=heartbeat.DEFAULT_MINUTES)
    # The first heartbeats are still queued: the next period passes without a second
    # (at most one heartbeat open per agent) …
    assert services.enqueue_periodic(T.HEARTBEAT, now=later) == 0
    # … and once they are handled, the period after gets its own, once.
    MailboxItem.objects.filter(source_type=T.HEARTBEAT).update(status=Status.COMPLETED)
    after = later + timedelta(minutes=heartbeat.DEFAULT_MINUTES)
    assert services.enqueue_periodic(T.HEARTBEAT, now=after) == len(crew)
    assert services.enqueue_periodic(T.HEARTBEAT, now=after) == 0
    counts = items_per_agent_and_period(T.HEARTBEAT)
    assert len(counts) == 2 * len(crew) and set(counts.values()) == {1}
    queued = Counter(
        MailboxItem.objects.filter(source_type=T.HEARTBEAT, status=Status.QUEUED).values_list("agent_id", flat=True)
    )
    assert set(queued.values()) == {1}

    services.enqueue_periodic(T.DAILY_REPORT, now=now)
    assert services.enqueue_periodic(T.DAILY_REPORT, now=now + timedelta(days=1)) == len(crew)
    assert MailboxItem.objects.filter(source_type=T.DAILY_REPORT).count() == 2 * len(crew)


@pytest.mark.django_db
def test_a_handled_item_of_the_period_counts_as_well(crew):
    services.enqueue_periodic(T.DAILY_REPORT)
    MailboxItem.objects.filter(source_type=T.DAILY_REPORT).update(status=Status.COMPLETED)
    assert services.enqueue_periodic(T.DAILY_REPORT) == 0
    MailboxItem.objects.filter(source_type=T.DAILY_REPORT).update(status=Status.PROCESSING)
    assert services.enqueue_periodic(T.DAILY_REPORT) == 0
    assert MailboxItem.objects.filter(source_type=T.DAILY_REPORT).count() == len(crew)


@pytest.mark.pg
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("source_type", PERIODIC, ids=str)
def test_beats_from_several_threads_at_once_give_one_item_per_agent_and_period(crew, source_type):
    beats, errors = 6, []
    start = threading.Barrier(beats)

    def beat() -> None:
        try:
            start.wait(timeout=30)
            services.enqueue_periodic(source_type)
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
    counts = items_per_agent_and_period(source_type)
    print(f"\n{source_type}: items per agent and period {dict(counts)}")
    assert sorted(agent for agent, _ in counts) == sorted(crew)
    assert set(counts.values()) == {1}, f"items per agent and period: {dict(counts)}"
