"""The single-focus invariant under attack, counted from decision and activity records."""

from __future__ import annotations

import random
import threading

import pytest
from django.conf import settings
from django.db import connection

from attention import lease_keeper as lease_mod
from attention import loop
from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn

from .conftest import wait_for
from .invariants import assert_single_focus

KINDS = [T.SYSTEM_EVENT, T.REVIEW_REQUEST, T.SESSION_REPLY, T.DAILY_REPORT]


def _enqueue_many(agent_id, n, seed):
    rng = random.Random(seed)
    try:
        for i in range(n):
            mailbox_enqueue(
                agent_id=agent_id,
                source_type=rng.choice(KINDS),
                priority=rng.randint(0, 4),
                payload={"summary": f"s{seed}-{i}", "content": f"c{seed}-{i}"},
            )
    finally:
        connection.close()


@pytest.mark.pg
@pytest.mark.slow
def test_many_threads_and_the_worker_hammering_one_agent_never_process_two_items_at_once(
    celery_worker, scripted, agent
):
    scripted(default=Turn(text="ok", delay=0.005))
    stop = threading.Event()
    runs = []

    def competitor():
        try:
            while not stop.is_set():
                runs.append(loop.run_attention(agent.id).status)
        finally:
            connection.close()

    writers = [threading.Thread(target=_enqueue_many, args=(agent.id, 25, s)) for s in range(6)]
    racers = [threading.Thread(target=competitor) for _ in range(3)]
    for t in writers + racers:
        t.start()
    for t in writers:
        t.join()
    total = 6 * 25
    wait_for(
        lambda: MailboxItem.objects.filter(agent=agent, status="completed").count() == total,
        timeout=120,
        message="all items completed",
    )
    stop.set()
    for t in racers:
        t.join()
    counts = assert_single_focus(agent.id)
    assert counts["statuses"] == {"completed": total}
    assert counts["picks"] == total and counts["open"] == 0
    assert "busy" in runs  # the racers really did collide on the lease


@pytest.mark.pg
def test_a_worker_frozen_past_its_lease_cannot_write_over_its_successor(transactional_db, scripted, agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "LEASE_SECONDS", 0.5)
    monkeypatch.setattr(lease_mod.LeaseKeeper, "_run", lambda self: None)  # the freeze stops renewals too
    frozen = Turn(tool_calls=[("check_mailbox", {})], delay=2.0)
    scripted(frozen, default=Turn(text="ok"))
    first = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "A", "content": "a"})
    result = {}

    def stale_worker():
        try:
            result["r"] = loop.run_attention(agent.id)
        finally:
            connection.close()

    t = threading.Thread(target=stale_worker)
    t.start()
    assert frozen.started.wait(10)
    second = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "B", "content": "b"})
    wait_for(lambda: loop.run_attention(agent.id).status == "done", timeout=10, message="successor took the lease")
    t.join(15)
    assert result["r"].status == "stale"
    stale_item = MailboxItem.objects.get(id=first.id)
    assert stale_item.status == "dropped" and "recovery" in stale_item.drop_reason
    assert MailboxItem.objects.get(id=second.id).status == "completed"
    stale_epoch = AgentDecision.objects.get(mailbox_item_id=first.id, decision_type="pick").lease_epoch
    assert not AgentDecision.objects.filter(lease_epoch=stale_epoch).exclude(decision_type="pick").exists()
    stale_activity = AgentActivity.objects.get(mailbox_item_id=first.id)
    assert stale_activity.total_tools == 0  # its tool round never landed
    # The successor's recovery closed it as failed ("worker lost"), not the stale worker.
    assert stale_activity.ended_at is not None and stale_activity.success is False
    assert stale_activity.logs.filter(type="error", content__startswith="worker lost").exists()
    assert_single_focus(agent.id)
