"""Scenario 4: Redis (broker and channel layer) goes down for 20 s under load and
comes back empty on the same port (no persistence: every Celery message in it is
gone). Nothing may be lost: the database is the queue, and the beat sweep repairs the
lost wake-ups once the broker is back."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from .figures import assert_invariants, collect, completions, settle
from .harness import Api, LoadGenerator, Plan, boot, requests_for, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

DOWN_FOR = 20.0


def test_redis_down_for_20_seconds_loses_nothing(cluster, report, clock):
    seeded = boot(cluster)
    plan = Plan(chats=4, events=4, tasks=2, seconds=10.0)
    load = LoadGenerator(Api(cluster.base, seeded.token), requests_for(seeded.agents, plan), plan.seconds).start()
    time.sleep(3.0)
    down_at = timezone.now()
    cluster.redis.stop()
    time.sleep(DOWN_FOR)
    during = completions(since=down_at)
    late = completions(since=down_at + timedelta(seconds=5))  # after what was in flight
    cluster.redis.start()
    up_at = timezone.now()
    load.join()
    settled = settle(120)
    resumed = (first_completion_after(up_at) - up_at).total_seconds()
    drained = (last_completion() - up_at).total_seconds()
    figures = collect(others=f"{during}items_done_while_down({late}_after_its_first_5s)")
    figures.extra = (
        f"down={DOWN_FOR:.0f}s resumed_{resumed:.0f}s_after_restart drained_{drained:.0f}s_after_restart "
        f"requests={load.sent} request_errors={len(load.errors)}"
    )
    report(figures.line("4 redis-down", clock()))
    assert not load.errors, load.errors[:5]
    assert_invariants(figures, settled)


def first_completion_after(at):
    from django.db.models import Min

    from mailbox.models import MailboxItem

    return MailboxItem.objects.filter(completed_at__gte=at).aggregate(m=Min("completed_at"))["m"] or at


def last_completion():
    from django.db.models import Max

    from mailbox.models import MailboxItem

    return MailboxItem.objects.aggregate(m=Max("completed_at"))["m"]


def test_worker_keeps_consuming_after_redis_restarts_under_a_task_in_flight(cluster, report, clock):
    """The broker goes away while a worker runs a task (its message not yet acked) and
    waits on Redis for the next one: the worker must reconnect and take new work, not
    stop (celery's consumer closes the lost connection twice; kombu's second close of
    the Redis channel, with the transport already detached, used to raise
    AttributeError "'NoneType' object has no attribute 'hostname'", an "Unrecoverable
    error": the worker shut down once its tasks in flight ended, and nothing consumed)."""
    cluster.llm.think = (4.0, 4.0)  # the first item is still in flight when Redis goes
    # Three agents on one worker of four threads: a thread stays free, so the worker
    # also waits on Redis (BRPOP) for its next message when Redis goes.
    seeded = boot(cluster, agents=3, workers=("w1",))
    api = Api(cluster.base, seeded.token)
    first, rest = seeded.agents[0], seeded.agents[1:]
    status, answer = api.post(f"/api/agents/{first}/mailbox", chat("before the outage"))
    assert status < 300, answer
    wait_until(lambda: processing(first), timeout=30, interval=0.05, what=f"{first}'s item in flight")
    cluster.redis.stop()
    time.sleep(1.0)
    cluster.redis.start()
    up_at = timezone.now()
    cluster.llm.think = (0.05, 0.1)
    for agent in rest:
        status, answer = api.post(f"/api/agents/{agent}/mailbox", chat("after the outage"))
        assert status < 300, answer
    settled = settle(60)
    cluster.check_alive("w1")
    cluster.wait_workers("w1", timeout=30)  # its consumer answers again
    done = completions(rest, since=up_at)
    figures = collect(others=f"{done}items_of_the_{len(rest)}_other_agents_done_after_the_restart")
    report(figures.line("4b redis-restart-in-flight", clock()))
    assert_invariants(figures, settled)


def chat(text: str) -> dict:
    return {"sourceType": "human_chat", "payload": {"summary": text, "content": text}}


def processing(agent: str) -> bool:
    from mailbox.models import MailboxItem

    return MailboxItem.objects.filter(agent_id=agent, status="processing").exists()
