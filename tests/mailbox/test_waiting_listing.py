"""A listing of the queue's head (a prompt's mailbox block) reads what it shows: id,
priority, type and summary, the summary taken out of the payload by the database; no
model instance is made and no payload decoded for an item whose summary is a string,
and every item reads as the model reads it (``MailboxItem.summary``), whatever its
payload holds."""

from __future__ import annotations

import pytest
from django.db import connection, models
from django.test.utils import CaptureQueriesContext

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.selectors import waiting_listing
from mailbox.services import mailbox_enqueue

pytestmark = [pytest.mark.pg, pytest.mark.django_db]

PAYLOADS = [
    {"summary": "plain", "content": "c"},
    {"summary": 'héllo ✓ "quoted" \\ back', "extra": {"n": 1}},
    {"summary": 42},
    {"summary": None},
    {"summary": {"nested": [1, 2]}},
    {"summary": True},
    {"content": "no summary"},
    {},
    {"summary": ""},
]


def test_the_listing_is_what_the_items_show_in_dequeue_order(agent):
    # Payloads the API would not take (it wants a string summary), written as an older
    # row or another writer may have stored them.
    for i, payload in enumerate([*PAYLOADS, None]):
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "x"}, priority=1 + i % 3
        )
        stored = models.Value(None, models.JSONField()) if payload is None else payload  # JSON null
        MailboxItem.objects.filter(id=item.id).update(payload=stored)
    listed = waiting_listing(agent.id, 50)
    head = MailboxItem.objects.filter(agent_id=agent.id, status=Status.QUEUED).order_by("priority", "queued_at", "id")
    assert [(x.id, x.priority, x.source_type, x.summary) for x in listed] == [
        (i.id, i.priority, i.source_type, i.summary) for i in head
    ]
    assert len(listed) == len(PAYLOADS) + 1
    assert {x.summary for x in listed} >= {"plain", 'héllo ✓ "quoted" \\ back', "42", "None", "True", ""}
    assert waiting_listing(agent.id, 3) == listed[:3]


def test_a_string_summary_is_listed_without_an_instance_in_one_statement(agent, monkeypatch):
    for i in range(20):
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": f"item {i}"})
    waiting_listing(agent.id, 50)  # made once per connection
    made: list[type] = []
    original = models.Model.__init__

    def spy(self, *args, **kwargs):
        made.append(type(self))
        original(self, *args, **kwargs)

    monkeypatch.setattr(models.Model, "__init__", spy)
    with CaptureQueriesContext(connection) as queries:
        listed = waiting_listing(agent.id, 50)
    assert len(queries) == 1 and made == []
    assert [x.summary for x in listed] == [f"item {i}" for i in range(20)]
