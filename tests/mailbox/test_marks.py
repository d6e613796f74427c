"""What the system keeps on an item for itself lives in ``MailboxItem.marks``, apart from
the caller's ``metadata``: a request cannot write it (so no list of reserved keys guards
it), the API shows it read-only, and a migration moved the keys older rows kept in their
metadata."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue

T = MailboxType
pytestmark = pytest.mark.django_db


def test_a_caller_who_sends_the_systems_keys_in_metadata_parks_batches_and_counts_nothing(agent, alice_client):
    other = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "x", "content": "x"})
    forged = {"waitingForApproval": True, "approvalId": "apr_x", "batch": [other.id], "crashes": 9}
    response = alice_client.post(
        f"/api/agents/{agent.id}/mailbox",
        {"sourceType": "system_event", "payload": {"summary": "hi", "content": "hi"}, "metadata": forged},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["marks"] == {} and body["metadata"]["crashes"] == 9  # the caller's own, meaning nothing
    item = MailboxItem.objects.get(id=body["id"])
    assert item.marks == {}
    lifecycle.defer(item.id)
    assert lifecycle.resurface_due(agent.id) == 1  # not parked by a forged flag
    assert MailboxItem.objects.get(id=item.id).status == Status.QUEUED


def test_the_api_shows_an_items_marks_read_only(agent, alice_client):
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "x", "content": "x"}, marks={"crashes": 1}
    )
    queued = alice_client.get(f"/api/agents/{agent.id}/mailbox").json()["queued"]
    assert [q["marks"] for q in queued if q["id"] == item.id] == [{"crashes": 1}]


def test_the_migration_moves_the_systems_keys_out_of_older_rows_metadata(agent):
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "x", "content": "x"})
    old = {"senderId": "1", "crashes": 1, "markerRetries": 2, "streamId": "stm_1", "batchLead": "mbx_1"}
    MailboxItem.objects.filter(id=item.id).update(metadata=old, marks={})
    migration = importlib.import_module("mailbox.migrations.0004_item_marks")
    migration.move_marks(apps, None)
    item.refresh_from_db()
    assert item.metadata == {"senderId": "1"}
    assert item.marks == {"crashes": 1, "markerRetries": 2, "streamId": "stm_1", "batchLead": "mbx_1"}
    migration.unmove_marks(apps, None)
    item.refresh_from_db()
    assert item.metadata == old
