"""Task transitions on the bus: a validated ``markus.task.lifecycle.v1`` record per
transition, addressed to the owner and the watchers, with the real actor, relayed
after commit by the operator persona."""

from __future__ import annotations

import pytest
from django.db import transaction

from agentbus import outbox, selectors
from agentbus.models import OPERATOR_ID, OutboxRecord, OutboxStatus
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.models import Task, TaskState
from markus.work.services import task_create, task_transition


@pytest.fixture
def people(alice, team):
    owner, _ = agent_create(name="Owen", agent_id="owen", owner=alice, team=team)
    watcher, _ = agent_create(name="Wanda", agent_id="wanda", owner=alice, team=team, kind="external")
    reviewer, _ = agent_create(name="Rita", agent_id="rita", owner=alice, team=team)
    return owner, watcher, reviewer


def topics(agent_id):
    # From the start: an internal owner's inbox is consumed as its mailbox hears the task.
    return [(m["topic"], m["sender"], m["payload"]["to"]) for m in selectors.inbox_read_from(agent_id, 0)["messages"]]


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_filing_and_transitions_reach_the_owner_and_the_watchers_with_the_real_actor(people, alice):
    owner, watcher, reviewer = people
    human = Actor.for_user(alice)
    task = task_create(
        actor=human,
        title="Ship it",
        assignee_id=owner.id,
        reviewer_agent_id=reviewer.id,
        metadata={"watchers": [watcher.id]},
    )
    task_transition(task_id=task.id, to_status=TaskState.BLOCKED, actor=human)
    expected = [
        ("task.pending", OPERATOR_ID, "pending"),
        ("task.in_progress", OPERATOR_ID, "in_progress"),
        ("task.blocked", OPERATOR_ID, "blocked"),
    ]
    assert topics(watcher.id) == expected
    assert topics(owner.id) == expected
    assert topics(reviewer.id) == []  # not the owner, not a watcher
    last = selectors.inbox_read_from(watcher.id, 0)["messages"][-1]["payload"]
    assert last["schema"] == "markus.task.lifecycle.v1" and last["taskId"] == task.id
    assert last["from"] == "in_progress" and last["actor"] == {"type": "user", "id": str(alice.pk), "name": "alice"}
    assert last["ownerId"] == owner.id and last["watchers"] == [watcher.id]
    assert OutboxRecord.objects.filter(status=OutboxStatus.RELAYED).count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_audience_travels_with_the_row_even_if_the_owner_is_gone_when_it_is_relayed(people, alice, monkeypatch):
    owner, _, _ = people
    human = Actor.for_user(alice)
    monkeypatch.setattr(outbox, "_publish", lambda row: (_ for _ in ()).throw(ConnectionError("bus down")))
    task = task_create(actor=human, title="Risky", assignee_id=owner.id, start=False)
    task_transition(task_id=task.id, to_status=TaskState.CANCELLED, actor=human)
    rows = list(OutboxRecord.objects.order_by("id"))
    assert [r.status for r in rows] == [OutboxStatus.PENDING, OutboxStatus.PENDING]  # the bus failed
    assert Task.objects.get(id=task.id).status == TaskState.CANCELLED  # the transition stands
    Task.objects.filter(id=task.id).update(assignee=None)  # the owner is released afterwards
    monkeypatch.undo()
    from datetime import timedelta

    from django.utils import timezone

    outbox.outbox_relay(now=timezone.now() + timedelta(minutes=10))
    assert [t for t, _, _ in topics(owner.id)] == ["task.pending", "task.cancelled"]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transition_writes_nothing_to_the_outbox(people, alice):
    owner, _, _ = people
    human = Actor.for_user(alice)
    task = task_create(actor=human, title="Maybe", assignee_id=owner.id, start=False)
    before = OutboxRecord.objects.count()
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            task_transition(task_id=task.id, to_status=TaskState.CANCELLED, actor=human)
            raise RuntimeError("something else failed in the same transaction")
    assert OutboxRecord.objects.count() == before
    assert Task.objects.get(id=task.id).status == TaskState.PENDING
