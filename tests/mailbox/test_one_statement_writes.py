"""The one-statement claim and transitions keep the epoch, the order and the events,
and the ``agent:mailbox`` event is the item's serialisation, made once."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.lease import Lease, StaleLease, fenced
from attention.models import AgentAttention
from mailbox import lifecycle, representation
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status

T = MailboxType
pytestmark = [pytest.mark.django_db, pytest.mark.pg]


@pytest.fixture
def lease(agent):
    AgentAttention.objects.update_or_create(agent_id=agent.id, defaults={"lease_epoch": 7, "lease_owner": "w1"})
    return Lease(agent_id=agent.id, owner="w1", epoch=7)


def test_a_fenced_claim_of_the_head_is_one_statement_and_records_the_epoch(agent, enqueue, lease):
    low = enqueue(T.HEARTBEAT)
    head = enqueue(T.HUMAN_CHAT)
    with CaptureQueriesContext(connection) as queries:
        item = lifecycle.claim_next(agent_id=agent.id, epoch=lease.epoch)
    assert len(queries) == 1, [q["sql"] for q in queries.captured_queries]
    assert item is not None and item.id == head.id
    assert (item.status, item.lease_epoch, item.attempts) == (Status.PROCESSING, 7, 1)
    assert MailboxItem.objects.get(id=low.id).status == Status.QUEUED


def test_a_stale_worker_claims_nothing(agent, enqueue, lease):
    """The loop claims inside its fenced transaction: once another worker holds the
    lease, the fence refuses before anything is written."""
    item = enqueue(T.MENTION)
    AgentAttention.objects.filter(agent_id=agent.id).update(lease_epoch=8, lease_owner="w2")
    for claim in (
        lambda tx: lifecycle.claim_next(agent_id=agent.id, epoch=tx.epoch),
        lambda tx: lifecycle.claim(item.id, epoch=tx.epoch),
    ):
        with pytest.raises(StaleLease), fenced(lease) as tx:
            claim(tx)
    item.refresh_from_db()
    assert (item.status, item.attempts, item.lease_epoch) == (Status.QUEUED, 0, None)


def test_a_stale_epoch_cannot_complete_and_the_right_one_can(agent, enqueue, lease):
    enqueue(T.MENTION)
    item = lifecycle.claim_next(agent_id=agent.id, epoch=lease.epoch)
    assert lifecycle.complete(item.id, epoch=6, fenced=True) is False
    assert MailboxItem.objects.get(id=item.id).status == Status.PROCESSING
    assert lifecycle.complete(item.id, epoch=7, fenced=True) is True
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED


def test_a_put_back_refunds_the_attempt_and_never_goes_below_zero(agent, enqueue, lease):
    enqueue(T.MENTION)
    item = lifecycle.claim_next(agent_id=agent.id, epoch=7)
    MailboxItem.objects.filter(id=item.id).update(attempts=0)
    assert lifecycle.put_back(item.id, epoch=7)
    item.refresh_from_db()
    assert (item.status, item.attempts, item.started_at, item.lease_epoch) == (Status.QUEUED, 0, None, None)


def test_the_claimed_item_is_the_row_as_stored(agent, enqueue):
    enqueue(T.A2A_MESSAGE, summary="s", content="c", extra={"channelKey": "k"}, metadata={"senderId": "x"})
    claimed = lifecycle.claim_next(agent_id=agent.id)
    stored = MailboxItem.objects.get(id=claimed.id)
    for field in MailboxItem._meta.concrete_fields:
        assert getattr(claimed, field.attname) == getattr(stored, field.attname), field.attname
    assert claimed._state.adding is False


def round_tripped(item: MailboxItem) -> dict:
    return json.loads(json.dumps(representation.serialize_item(item), cls=DjangoJSONEncoder))


@pytest.mark.parametrize(
    "at",
    [datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC), datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)],
)
def test_the_event_item_is_the_json_round_trip_of_the_serialisation(agent, enqueue, at):
    first = enqueue(T.TASK_COMMENT, taskId="t", metadata={"senderRole": "user"})
    second = enqueue(T.TASK_COMMENT, taskId="t")  # merged into the first
    MailboxItem.objects.filter(id=first.id).update(queued_at=at, started_at=at, deferred_until=at)
    for item in MailboxItem.objects.filter(id__in=[first.id, second.id]):
        assert representation.event_item(item) == round_tripped(item)
    assert second.status == Status.MERGED
    assert representation.event_item(second) == round_tripped(second)  # an in-memory row, enum status and all
