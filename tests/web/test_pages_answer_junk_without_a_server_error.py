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
from django.urls import reverse

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
    a, t = {"agent_id": agent.id}, {"team_id": team.id}
    routes: list[tuple[str, dict[str, str]]] = [
        ("home", {}), ("home-agents", {}), ("home-notifications", {}), ("work", {}), ("agents", {}),
        ("agent-new", {}), ("teams", {}), ("deployment-usage", {}), ("approvals", {}),
        ("work-task-new", {}), ("work-requirement-new", {}),
        ("mind", a), ("mind-timeline", a),
        *(("mind-control", {**a, "action": action}) for action in ("pause", "resume", "wake", "heartbeat-now")),
        ("mind-item-control", {**a, "item_id": item.id, "action": "retry"}),
        ("mind-item-control", {**a, "item_id": item.id, "action": "drop"}),
        ("mind-item-control", {**a, "item_id": "nope", "action": "drop"}),
        ("mind-reminder-cancel", {**a, "item_id": item.id}), ("mind-activity-logs", {**a, "activity_id": "nope"}),
        ("agent-report", {**a, "day": "2026-12-06"}), ("agent-report", {**a, "day": "2026-13-45"}),
        ("chat", a), ("chat-messages", a), ("chat-session-new", a), ("agent-connect", a),
        ("agent-token-rotate", a), ("agent-token-revoke", a), ("agent-usage", a), ("agent-settings", a),
        ("team-usage", t), ("team-channel", t), ("team-channel-messages", t),
        ("work-task-move", {"task_id": task.id}), ("work-task-comment", {"task_id": task.id}),
        ("work-requirement-step", {"requirement_id": requirement.id, "step": "approve"}),
        ("work-requirement-step", {"requirement_id": requirement.id, "step": "reject"}),
        ("work-requirement-comment", {"requirement_id": requirement.id}),
        ("approval-answer", {"approval_id": approval.id}),
    ]  # fmt: skip
    return [reverse(name, kwargs=kwargs) for name, kwargs in routes]


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
