"""The burst-coalescing window (``MARKUS_COALESCE_WINDOW_MS``, ``attention.loop``): a head
of the queue that a follow-up could still fold into (an item about a task, not strict,
not a person's) waits out the window unclaimed, so a follow-up arriving in it folds into
the waiting item at enqueue (``mailbox.merge``'s dedup group) and the two are handled as
one run. Any other head starts at once."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from attention import loop, queue_read
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn

pytestmark = pytest.mark.pg


def comment(agent, task_id: str, text: str, *, sender: str = "agent") -> MailboxItem:
    who = {"senderRole": "agent", "senderId": "bea", "senderName": "Bea"}
    if sender == "user":
        who = {"senderRole": "user", "senderId": "1", "senderName": "alice"}
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.TASK_COMMENT,
        payload={"taskId": task_id, "summary": text, "content": text},
        metadata=who,
    )


@pytest.mark.django_db
def test_only_a_fresh_head_a_follow_up_could_fold_into_waits(agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 5000)
    fresh = comment(agent, "tsk_1", "first note")
    assert 4 < queue_read.window_left(fresh) <= 5
    persons = comment(agent, "tsk_2", "a person's note", sender="user")
    assert queue_read.window_left(persons) == 0  # a person's comment starts at once
    chat = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": "hi"})
    assert queue_read.window_left(chat) == 0  # strict: nothing folds into a chat's item
    MailboxItem.objects.filter(id=fresh.id).update(queued_at=timezone.now() - timedelta(seconds=6))
    fresh.refresh_from_db()
    assert queue_read.window_left(fresh) == 0  # it waited in the queue that long already
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 0)
    assert queue_read.window_left(comment(agent, "tsk_3", "no window")) == 0


@pytest.mark.django_db(transaction=True)
def test_a_follow_up_in_the_window_folds_into_the_waiting_item_and_one_run_handles_both(agent, scripted, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 3000)
    provider = scripted(default=Turn(text="Noted both."))
    waiting = threading.Event()

    class Clock:
        """``attention.loop``'s ``time``, telling the test when the head waits out the window."""

        def __getattr__(self, name):
            return getattr(time, name)

        def sleep(self, seconds):
            waiting.set()
            time.sleep(seconds)

    monkeypatch.setattr(loop, "time", Clock())
    head = comment(agent, "tsk_9", "The spec moved to v2.")
    runs = []

    def run():
        try:
            runs.append(loop.run_attention(agent.id))
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    assert waiting.wait(10), "the head did not wait out the window"
    assert MailboxItem.objects.get(id=head.id).status == Status.QUEUED  # unclaimed while it waits
    follow_up = comment(agent, "tsk_9", "And the deadline is Friday.")
    worker.join(30)
    assert not worker.is_alive()

    follow_up.refresh_from_db()
    head.refresh_from_db()
    assert (follow_up.status, follow_up.merged_into_id) == (Status.MERGED, head.id)
    assert head.status == Status.COMPLETED
    assert "The spec moved to v2." in head.content and "And the deadline is Friday." in head.content
    handled = MailboxItem.objects.filter(agent=agent).exclude(status=Status.MERGED)
    assert list(handled.values_list("id", flat=True)) == [head.id]  # one item, one run
    [call] = provider.calls  # one model run, which saw both
    text = " ".join(str(m.get("content")) for m in call["messages"])
    assert "The spec moved to v2." in text and "And the deadline is Friday." in text
