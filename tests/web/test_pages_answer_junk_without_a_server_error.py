"""Every page and page action, given junk in any query parameter or form field a page
might read, answers without a server error: a 4xx with its message, the page again with
the field's error, or a redirect (bad input loses nothing and is never a 500).

A sweep, not one case: each URL of the pages' routes (with real ids and ids that name
nothing) × each parameter or field name the pages read × the values that broke pages
before (too long for a column, too large for an integer, negative, not a date, a NUL).
A failure lists every request that answered 5xx, to replay by hand."""

from __future__ import annotations

import pytest
from django.test import Client

from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.work.models import Requirement, Task
from notifications.models import Approval

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

JUNK = ["x" * 5000, "9" * 30, "-1", "1.5", "2026-13-45", "a\x00b"]
PARAMS = [
    "q", "page", "cursor", "after", "before", "limit", "session", "status", "date", "day", "task",
    "requirement", "agent", "kind", "type", "from", "to", "days", "sort", "o", "filter", "assignee",
    "tab", "view", "next", "item",
]  # fmt: skip
FIELDS = [
    "title", "description", "content", "text", "status", "priority", "assignee", "reply_to",
    "replyToCommentId", "option", "answer", "name", "role", "kind", "team", "session", "interval",
    "heartbeat_interval_minutes", "model", "budget", "limit", "daily", "monthly", "tokens", "usd",
    "timezone", "active_start", "active_end", "reason", "comment", "due", "note", "message", "value",
    "to", "step", "action", "next", "instructions", "tools",
]  # fmt: skip


def _urls(agent, team, user) -> list[str]:
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": "hi", "content": "hi"}
    )
    task = Task.objects.create(title="T", assignee=agent)
    requirement = Requirement.objects.create(title="R", created_by_agent=agent)
    approval = Approval.objects.create(
        user=user,
        agent=agent,
        mailbox_item=item,
        title="ok?",
        options=[{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
    )
    a, t = agent.id, team.id
    return [
        "/", "/home/agents/", "/home/notifications/", "/work/", "/agents/", "/agents/new/", "/teams/",
        "/usage/", "/approvals/", "/work/tasks/new/", "/work/requirements/new/",
        f"/agents/{a}/mind/", f"/agents/{a}/mind/timeline/", f"/agents/{a}/mind/pause/",
        f"/agents/{a}/mind/resume/", f"/agents/{a}/mind/wake/", f"/agents/{a}/mind/heartbeat-now/",
        f"/agents/{a}/mind/items/{item.id}/retry/", f"/agents/{a}/mind/items/{item.id}/drop/",
        f"/agents/{a}/mind/items/nope/drop/", f"/agents/{a}/mind/reminders/{item.id}/cancel/",
        f"/agents/{a}/mind/activities/nope/logs/", f"/agents/{a}/reports/2026-12-06/",
        f"/agents/{a}/reports/2026-13-45/", f"/agents/{a}/chat/", f"/agents/{a}/chat/messages/",
        f"/agents/{a}/chat/sessions/new/", f"/agents/{a}/connect/", f"/agents/{a}/connect/rotate/",
        f"/agents/{a}/connect/revoke/", f"/agents/{a}/usage/", f"/agents/{a}/settings/",
        f"/teams/{t}/usage/", f"/teams/{t}/channel/", f"/teams/{t}/channel/messages/",
        f"/work/tasks/{task.id}/move/", f"/work/tasks/{task.id}/comments/",
        f"/work/requirements/{requirement.id}/approve/", f"/work/requirements/{requirement.id}/reject/",
        f"/work/requirements/{requirement.id}/comments/", f"/approvals/{approval.id}/answer/",
    ]  # fmt: skip


def test_no_page_answers_junk_in_a_parameter_or_a_field_with_a_server_error(alice, agent, team):
    alice.is_staff = alice.is_superuser = True  # every page and action is open to her
    alice.save()
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    failed = []
    for url in _urls(agent, team, alice):
        for value in JUNK:
            for name in PARAMS:
                if (status := client.get(url, {name: value}).status_code) >= 500:
                    failed.append(("GET", url, name, value[:12], status))
            for name in FIELDS:
                if (status := client.post(url, {name: value}).status_code) >= 500:
                    failed.append(("POST", url, name, value[:12], status))
            if (status := client.post(url, dict.fromkeys(FIELDS, value)).status_code) >= 500:
                failed.append(("POST every field", url, "", value[:12], status))
    assert failed == []
