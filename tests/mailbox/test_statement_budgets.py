"""Statement budgets of the mailbox's hot paths (issue 12): an enqueue, a claim of the
next item and a complete each issue a fixed number of statements, the same with 10 and
with 1,000 rows already in the agent's queue and history.

Measured outside any transaction (``transaction=True``), as the services run for a
caller that has none: an item of no dedup group is one INSERT, a claim one ``UPDATE …
RETURNING``, a complete one ``UPDATE … RETURNING``: no BEGIN/COMMIT pair, no re-read.
An item of a dedup group runs in one transaction: its lock (PostgreSQL's advisory
lock; SQLite's write lock is the transaction itself), the search for a queued item to
absorb it, the INSERT and, when it merges, the two rows' updates.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue

T = MailboxType
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]
SIZES = [10, 1000]


def fill(agent_id: str, n: int) -> None:
    """n queued items (lower priority than the test's own) and n completed ones."""
    now = timezone.now()
    rows = []
    for i in range(n):
        at = now - timedelta(seconds=n - i)
        rows.append(
            MailboxItem(
                agent_id=agent_id,
                source_type=T.SYSTEM_EVENT,
                priority=4,
                payload={"summary": f"queued {i}", "taskId": f"q{i}"},
                metadata={},
                queued_at=at,
            )
        )
        rows.append(
            MailboxItem(
                agent_id=agent_id,
                source_type=T.TASK_COMMENT,
                status=Status.COMPLETED,
                payload={"summary": f"done {i}", "taskId": "t1"},
                metadata={},
                queued_at=at,
                started_at=at,
                completed_at=at,
            )
        )
    MailboxItem.objects.bulk_create(rows, batch_size=500)


def statements(fn) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        fn()
    return [q["sql"] for q in queries.captured_queries]


def verbs(sqls: list[str]) -> list[str]:
    return [sql.split()[0].upper() for sql in sqls]


@pytest.mark.parametrize("n", SIZES)
def test_an_enqueue_of_no_dedup_group_is_one_insert(agent, n):
    fill(agent.id, n)
    sqls = statements(
        lambda: mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "hi", "content": "x"})
    )
    assert verbs(sqls) == ["INSERT"], sqls


@pytest.mark.parametrize("n", SIZES)
def test_an_enqueue_inside_a_transaction_joins_it_without_a_savepoint(agent, n):
    fill(agent.id, n)
    with transaction.atomic():
        sqls = statements(lambda: mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "a"}))
        sqls += statements(
            lambda: mailbox_enqueue(agent_id=agent.id, source_type=T.TASK_COMMENT, payload={"taskId": "t9"})
        )
    lock = ["SELECT"] if connection.vendor == "postgresql" else []
    assert verbs(sqls) == ["INSERT", *lock, "SELECT", "INSERT"], sqls


@pytest.mark.parametrize("n", SIZES)
def test_an_enqueue_that_merges_into_its_dedup_group_has_a_fixed_budget(agent, n):
    fill(agent.id, n)
    first = mailbox_enqueue(agent_id=agent.id, source_type=T.TASK_COMMENT, payload={"taskId": "t2", "content": "a"})
    sqls = statements(
        lambda: mailbox_enqueue(agent_id=agent.id, source_type=T.TASK_COMMENT, payload={"taskId": "t2", "content": "b"})
    )
    lock = ["SELECT"] if connection.vendor == "postgresql" else []  # pg_advisory_xact_lock
    # BEGIN, the group lock, the absorber (locked), the new row, the survivor, COMMIT.
    assert verbs(sqls) == ["BEGIN", *lock, "SELECT", "INSERT", "UPDATE", "COMMIT"], sqls
    first.refresh_from_db()
    assert first.payload["content"].endswith("b")
    assert MailboxItem.objects.filter(agent_id=agent.id, status=Status.MERGED).count() == 1


@pytest.mark.parametrize("n", SIZES)
def test_a_claim_of_the_next_item_is_one_statement(agent, n):
    fill(agent.id, n)
    head = mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "first"})
    claimed = []
    sqls = statements(lambda: claimed.append(lifecycle.claim_next(agent_id=agent.id)))
    assert verbs(sqls) == ["UPDATE"], sqls
    assert claimed[0].id == head.id
    assert claimed[0].status == Status.PROCESSING and claimed[0].attempts == 1


@pytest.mark.parametrize("n", SIZES)
def test_a_complete_is_one_statement(agent, n):
    fill(agent.id, n)
    mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "first"})
    item = lifecycle.claim_next(agent_id=agent.id)
    done = []
    sqls = statements(lambda: done.append(lifecycle.complete(item.id)))
    assert verbs(sqls) == ["UPDATE"], sqls
    assert done == [True]
    item.refresh_from_db()
    assert item.status == Status.COMPLETED and item.completed_at is not None


@pytest.mark.parametrize("n", SIZES)
def test_a_claim_from_an_empty_queue_is_one_statement(agent, n):
    fill(agent.id, n)
    MailboxItem.objects.filter(agent_id=agent.id, status=Status.QUEUED).delete()
    sqls = statements(lambda: lifecycle.claim_next(agent_id=agent.id))
    assert verbs(sqls) == ["UPDATE"], sqls
