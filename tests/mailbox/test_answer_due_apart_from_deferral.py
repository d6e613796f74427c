"""When a person's answer is due is its own column, ``answer_due_at``, not a completed
item's ``deferred_until``: a delivered chat reads as completed with nothing deferred (in the
API, the events and the console), and the migration moves the deadlines stored the old way."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from mailbox import lifecycle
from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.representation import event_item, serialize_item
from mailbox.services import mailbox_enqueue

pytestmark = pytest.mark.django_db


def test_a_delivered_chat_keeps_its_deadline_apart_from_deferral(agent):
    item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"content": "hi"})
    due = timezone.now() + timedelta(hours=1)
    assert lifecycle.deliver(item, stream_id="hub.chat.ses_1", answer_due=due)
    item.refresh_from_db()
    assert (item.status, item.deferred_until, item.answer_due_at) == (Status.COMPLETED, None, due)
    assert serialize_item(item)["deferredUntil"] is None and serialize_item(item)["answerDueAt"] == due
    assert event_item(item)["deferredUntil"] is None and event_item(item)["answerDueAt"]
    assert list(lifecycle.answers_due(due)) == [item]
    assert lifecycle.answer_came([item.id]) == 1
    item.refresh_from_db()
    assert item.answer_due_at is None and not lifecycle.answers_due(due).exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_deadlines_stored_as_deferral():
    old, new = [("mailbox", "0008_answer_due_index")], [("mailbox", "0009_answer_due_at")]
    executor = MigrationExecutor(connection)
    executor.migrate(old)
    apps = executor.loader.project_state(old).apps
    Agent = apps.get_model("agents", "Agent")
    Item = apps.get_model("mailbox", "MailboxItem")
    now = timezone.now()
    Agent.objects.create(id="eve", name="Eve", kind="external")
    Item.objects.create(
        id="mbx_awaited",
        agent_id="eve",
        source_type=MailboxType.HUMAN_CHAT,
        status=Status.COMPLETED,
        completed_at=now,
        deferred_until=now + timedelta(hours=1),
        marks={DELIVERED_ON: "hub.chat.ses_1"},
    )
    Item.objects.create(
        id="mbx_parked", agent_id="eve", source_type="system_event", status=Status.DEFERRED, deferred_until=now
    )
    try:
        MigrationExecutor(connection).migrate(new)
    finally:  # the rest of the suite runs on the latest schema
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    awaited = MailboxItem.objects.get(id="mbx_awaited")
    parked = MailboxItem.objects.get(id="mbx_parked")
    assert (awaited.deferred_until, awaited.answer_due_at) == (None, now + timedelta(hours=1))
    assert (parked.deferred_until, parked.answer_due_at) == (now, None)
