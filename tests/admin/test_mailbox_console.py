"""Mailbox items in the console: the date range filter, and the retry and drop
actions with the semantics of markus.console.services."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue

T = MailboxType
pytestmark = pytest.mark.django_db
CHANGELIST = "admin:mailbox_mailboxitem_changelist"


def enqueue(agent, source_type=T.SYSTEM_EVENT, summary="Beat", **payload):  # (heartbeats collapse)
    return mailbox_enqueue(
        agent_id=agent.id, source_type=source_type, payload={"summary": summary, "content": summary, **payload}
    )


def act(client, action, *items, **extra):
    return client.post(reverse(CHANGELIST), {"action": action, "_selected_action": [i.pk for i in items], **extra})


def listed(client, **params) -> list[str]:
    response = client.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    return sorted(i.id for i in response.context["cl"].result_list)


def messages_of(client) -> list[str]:
    return [str(m) for m in client.get(reverse(CHANGELIST)).context["messages"]]


# ------------------------------------------------------------------ date range


def queued_on(agent, day: str, summary: str) -> MailboxItem:
    item = enqueue(agent, summary=summary)
    at = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)
    MailboxItem.objects.filter(id=item.id).update(queued_at=at)
    return item


def test_the_date_range_filter_keeps_items_queued_between_both_days_inclusive(operator, agent):
    may1, may2, may3 = (queued_on(agent, f"2026-05-0{d}", f"day {d}") for d in (1, 2, 3))
    assert listed(operator, queued_at_from="2026-05-02", queued_at_to="2026-05-03") == sorted([may2.id, may3.id])
    assert listed(operator, queued_at_from="2026-05-02") == sorted([may2.id, may3.id])
    assert listed(operator, queued_at_to="2026-05-01") == [may1.id]
    assert listed(operator, queued_at_from="2026-05-02", queued_at_to="2026-05-02") == [may2.id]
    assert listed(operator, queued_at_from="2026-05-04") == []


def test_the_date_range_combines_with_the_other_filters_and_keeps_them_in_its_form(operator, agent):
    queued_on(agent, "2026-05-02", "beat")
    chat = mailbox_enqueue(agent_id=agent.id, source_type=T.HUMAN_CHAT, payload={"summary": "hi"})
    MailboxItem.objects.filter(id=chat.id).update(queued_at=datetime(2026, 5, 2, 9, tzinfo=UTC))
    params = {"queued_at_from": "2026-05-01", "queued_at_to": "2026-05-02", "source_type__exact": T.HUMAN_CHAT}
    assert listed(operator, **params) == [chat.id]
    html = operator.get(reverse(CHANGELIST), params).content.decode()
    assert f'type="hidden" name="source_type__exact" value="{T.HUMAN_CHAT}"' in html
    assert 'name="queued_at_from" value="2026-05-01"' in html


def test_a_malformed_date_is_refused_like_any_bad_filter(operator, agent):
    response = operator.get(reverse(CHANGELIST), {"queued_at_from": "yesterday"})
    assert response.status_code == 302 and "e=1" in response["Location"]


# ------------------------------------------------------------------ retry


def completed(agent, **kw) -> MailboxItem:
    item = enqueue(agent, **kw)
    assert lifecycle.claim_next(agent_id=agent.id).id == item.id
    lifecycle.complete(item.id)
    item.refresh_from_db()
    return item


def test_retrying_a_completed_item_queues_a_fresh_copy_and_keeps_the_original(operator, agent):
    original = completed(agent, summary="Daily report")
    act(operator, "retry_items", original)
    copy = MailboxItem.objects.exclude(id=original.id).get()
    assert (copy.status, copy.source_type, copy.payload, copy.priority) == (
        Status.QUEUED,
        original.source_type,
        original.payload,
        original.priority,
    )
    assert copy.metadata["retryOf"] == original.id and copy.metadata["retriedBy"] == "operator"
    original.refresh_from_db()
    assert original.status == Status.COMPLETED
    assert any(f"copied as {copy.id}" in m for m in messages_of(operator))


def test_retrying_a_dropped_human_chat_queues_a_copy(operator, agent):
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hi", "content": "hi"},
        metadata={"senderRole": "user", "senderId": "1"},
    )
    lifecycle.drop(chat.id, reason="recovery: gave up")
    act(operator, "retry_items", chat)
    copy = MailboxItem.objects.get(metadata__retryOf=chat.id)
    assert copy.status == Status.QUEUED and copy.metadata["senderRole"] == "user"


def test_retrying_a_deferred_item_resurfaces_it_in_place(operator, agent):
    item = enqueue(agent)
    lifecycle.defer(item.id, until=datetime.now(UTC) + timedelta(hours=3))
    act(operator, "retry_items", item)
    item.refresh_from_db()
    assert (item.status, item.deferred_until) == (Status.QUEUED, None)
    assert MailboxItem.objects.count() == 1


def test_an_item_parked_for_an_approval_is_not_retried(operator, agent):
    item = enqueue(agent)
    lifecycle.defer(item.id)
    MailboxItem.objects.filter(id=item.id).update(marks={"waitingForApproval": True, "approvalId": "apr_1"})
    act(operator, "retry_items", item)
    item.refresh_from_db()
    assert item.status == Status.DEFERRED and MailboxItem.objects.count() == 1
    assert any("waits for approval apr_1" in m for m in messages_of(operator))


def test_a_merged_item_is_never_resurrected(operator, agent):
    first = enqueue(agent, T.TASK_COMMENT, "c1", taskId="tsk_1")
    second = enqueue(agent, T.TASK_COMMENT, "c2", taskId="tsk_1")
    assert second.status == Status.MERGED
    act(operator, "retry_items", second)
    second.refresh_from_db()
    assert second.status == Status.MERGED and MailboxItem.objects.count() == 2
    assert any(f"merged into {first.id}" in m for m in messages_of(operator))


def test_a_retried_copy_that_dedup_merges_says_so(operator, agent):
    done = completed(agent, source_type=T.TASK_COMMENT, summary="old", taskId="tsk_9")
    waiting = enqueue(agent, T.TASK_COMMENT, "new", taskId="tsk_9")
    act(operator, "retry_items", done)
    copy = MailboxItem.objects.get(metadata__retryOf=done.id)
    assert copy.status == Status.MERGED and copy.merged_into_id == waiting.id
    assert any(f"merged into queued {waiting.id}" in m for m in messages_of(operator))


def test_queued_and_processing_items_are_not_retried(operator, agent):
    working = enqueue(agent, summary="working")
    lifecycle.claim_next(agent_id=agent.id)
    waiting = enqueue(agent, summary="waiting")
    act(operator, "retry_items", working, waiting)
    assert MailboxItem.objects.count() == 2
    assert len([m for m in messages_of(operator) if "nothing to retry" in m]) == 2


# ------------------------------------------------------------------ drop


def test_drop_asks_for_a_reason_then_drops_a_queued_human_chat(operator, agent):
    chat = mailbox_enqueue(agent_id=agent.id, source_type=T.HUMAN_CHAT, payload={"summary": "spam"})
    form = act(operator, "drop_items", chat)
    assert form.status_code == 200 and b'name="reason"' in form.content
    chat.refresh_from_db()
    assert chat.status == Status.QUEUED
    assert act(operator, "drop_items", chat, apply="yes", reason="spam").status_code == 302
    chat.refresh_from_db()
    assert chat.status == Status.DROPPED and chat.drop_reason == "operator operator: spam"
    assert chat.completed_at is not None


def test_drop_without_a_reason_changes_nothing(operator, agent):
    item = enqueue(agent)
    response = act(operator, "drop_items", item, apply="yes", reason="")
    assert response.status_code == 200 and "reason" in response.context["form"].errors
    item.refresh_from_db()
    assert item.status == Status.QUEUED


def test_drop_takes_deferred_items_and_refuses_processing_and_finished_ones(operator, agent):
    deferred = enqueue(agent, summary="later")
    lifecycle.defer(deferred.id)
    working = enqueue(agent, summary="now")
    MailboxItem.objects.filter(id=working.id).update(priority=0)
    assert lifecycle.claim_next(agent_id=agent.id).id == working.id
    finished = completed(agent, summary="done")
    act(operator, "drop_items", deferred, working, finished, apply="yes", reason="cleanup")
    statuses = dict(MailboxItem.objects.values_list("id", "status"))
    assert statuses == {deferred.id: Status.DROPPED, working.id: Status.PROCESSING, finished.id: Status.COMPLETED}
    notes = messages_of(operator)
    assert any("pause the agent first" in m for m in notes) and any("only queued or deferred" in m for m in notes)
