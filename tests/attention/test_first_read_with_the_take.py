"""On PostgreSQL the statement that takes an agent's lease for a run also reads the head
of its queue (the take as a CTE, the loop's compiled queue read joined to it): from a
wake-up to the claim the run sends the take, then its fenced transaction (BEGIN, and
the attention UPDATE with the claim as one statement), one round trip less than a take
and a separate read.
What the run then does is the same: every item in dequeue order, a dead worker's items
recovered before the queue is read, nothing left for a later run to read."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention import loop, queue_read
from attention.lease import lease_release
from attention.lease_take import lease_take_for_run
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline_brain(offline_loop):
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"
    offline_loop(WAKE_ON_ENQUEUE=False)


def enqueue(agent_id: str, summary: str, priority: int | None = None) -> str:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.SYSTEM_EVENT,
        priority=priority,
        payload={"summary": summary, "content": summary},
    ).id


def test_a_run_sends_the_take_and_its_fenced_claim_before_the_first_item_starts(agent):
    loop.run_attention(agent.id)  # the agent's first run makes its attention row
    enqueue(agent.id, "one")
    with CaptureQueriesContext(connection) as ctx:
        loop.run_attention(agent.id)
    sent = [q["sql"] for q in ctx.captured_queries]
    claiming = 'UPDATE "mailbox_items" SET "status" = \'processing\''
    claim = next(i for i, sql in enumerate(sent) if claiming in sql)
    assert [sql.split()[0] for sql in sent[:claim]] == ["WITH", "BEGIN"], sent[:claim]
    assert sent[claim].startswith('WITH fence AS (UPDATE "agent_attention"'), sent[claim]
    assert "WITH took" in sent[0]
    assert "mailbox_items" in sent[0]


def test_the_run_takes_every_item_in_dequeue_order(agent):
    loop.run_attention(agent.id)
    ids = [enqueue(agent.id, "low", priority=3), enqueue(agent.id, "high", priority=0), enqueue(agent.id, "mid")]
    result = loop.run_attention(agent.id)
    assert result.processed == 3
    done = MailboxItem.objects.filter(id__in=ids).order_by("started_at").values_list("payload__summary", flat=True)
    assert list(done) == ["high", "mid", "low"]


def test_a_dead_workers_item_is_recovered_before_the_queue_is_read(agent):
    loop.run_attention(agent.id)
    lost = enqueue(agent.id, "lost")
    assert lifecycle.claim(lost, epoch=1) is not None  # a worker died mid-item
    waiting = enqueue(agent.id, "waiting")
    result = loop.run_attention(agent.id)
    assert set(result.items) >= {waiting}
    assert MailboxItem.objects.get(id=waiting).status == Status.COMPLETED
    assert MailboxItem.objects.get(id=lost).status in (Status.COMPLETED, Status.DROPPED)


def test_a_take_whose_run_never_read_leaves_nothing_for_a_later_read(agent):
    loop.run_attention(agent.id)
    first = enqueue(agent.id, "first")
    take = lease_take_for_run(agent.id)
    assert take.lease is not None
    lease_release(take.lease)  # the run ended before reading its queue
    MailboxItem.objects.filter(id=first).update(status=Status.DROPPED)
    assert queue_read.read_queue(agent.id).items == []


def test_the_take_does_not_wait_for_its_wal_flush_and_later_commits_do(agent):
    """The take's own commit is not waited for on disk (``synchronous_commit`` off for
    that statement's transaction alone, by ``set_config`` in it: a prepared statement is
    one statement): the run's next durable commit flushes it anyway, and a crash before
    that loses the run's writes with it. The session's later commits wait."""
    loop.run_attention(agent.id)
    enqueue(agent.id, "one")
    with CaptureQueriesContext(connection) as ctx:
        take = lease_take_for_run(agent.id)
    assert take.lease is not None
    assert len(ctx.captured_queries) == 1
    assert "set_config('synchronous_commit', 'off', true)" in ctx.captured_queries[0]["sql"]
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
    assert [i.summary for i in queue_read.read_queue(agent.id).items] == ["one"]
    lease_release(take.lease)
