"""The sweep finds a person's chats an outside agent has not answered in time by the
partial index ``idx_mailbox_answer_due``, which holds only the delivered items still
awaited: the completed items of every agent (the bulk of the table) are not walked.
On SQLite (the first pass) and PostgreSQL (the second, sequential scans priced out
after ``ANALYZE``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from mailbox.lifecycle import DELIVERED_ON, answers_due
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.agents.services import agent_create

from .test_hot_query_indexes import plan

pytestmark = [pytest.mark.django_db, pytest.mark.pg]
DONE = 3000
AWAITED = 30


@pytest.fixture
def delivered(alice, team) -> None:
    now = timezone.now()
    ada = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)[0]
    eve = agent_create(name="Eve", owner=alice, team=team, kind=Agent.Kind.EXTERNAL)[0]
    rows = [
        MailboxItem(id=f"mbx_done_{i:05d}", agent=ada, source_type=MailboxType.SYSTEM_EVENT, status=Status.COMPLETED)
        for i in range(DONE)
    ]
    rows += [
        MailboxItem(
            id=f"mbx_wait_{i:03d}",
            agent=eve,
            source_type=MailboxType.HUMAN_CHAT,
            status=Status.COMPLETED,
            completed_at=now - timedelta(hours=1),
            answer_due_at=now + timedelta(minutes=i - AWAITED // 2),
            marks={DELIVERED_ON: "hub.chat.ses_1"},
        )
        for i in range(AWAITED)
    ]
    rows += [  # deferred items have their own index: not these
        MailboxItem(
            id=f"mbx_later_{i:03d}",
            agent=ada,
            source_type=MailboxType.SYSTEM_EVENT,
            status=Status.DEFERRED,
            deferred_until=now - timedelta(minutes=1),
        )
        for i in range(AWAITED)
    ]
    MailboxItem.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE mailbox_items" if connection.vendor == "postgresql" else "ANALYZE")


def test_overdue_answers_are_found_in_due_order_from_their_partial_index(delivered):
    now = timezone.now()
    due = answers_due(now).order_by("answer_due_at").values_list("id", flat=True)
    assert list(due) == [f"mbx_wait_{i:03d}" for i in range(AWAITED // 2 + 1)]
    text = plan(due.all()[:200])
    assert "idx_mailbox_answer_due" in text, text  # (PostgreSQL may sort the few overdue rows it found)
    assert "mailbox_items_pkey" not in text and "idx_mailbox_agent_status" not in text, text
