"""Every page and page action, given junk in any query parameter or form field a page
might read, answers without a server error: a 4xx with its message, the page again with
the field's error, or a redirect (bad input loses nothing and is never a 500).

A sweep, not one case: each URL of the pages' routes (with real ids and ids that name
nothing) × each parameter or field name the page reads × the values that broke pages
before (too long for a column, too large for an integer, negative, not a date, a NUL).
Which names a page reads is recorded on the request's own ``QueryDict`` while it is
answered: first with nothing sent and with every name at once, then on every junk request
(a name first read only on a path that junk opens is swept too). The names are the page's
own, not only the lists below: a name the lists did not foresee is swept as well (the
approval's ``selectedOption`` was); a page that iterates or copies its parameters is
given every name of the lists. A name no page reads cannot change its answer, and
every junk value is still sent in every name at once, through the checks of every request
(``markus.core.input``, which read every name and are not counted as the page's reads).
A failure lists every request that answered 5xx, to replay by hand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
from django.http import QueryDict
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


EVERY = "*"  # the page iterated or copied its parameters: it reads every name
EVERY_NAME_READERS = ("items", "lists", "keys", "values", "dict", "__iter__", "copy", "urlencode")
ONE_NAME_READERS = ("__getitem__", "get", "getlist", "__contains__", "pop")
# Not the page's reads: the per-request character checks, and a QueryDict's own methods
# calling each other (``items`` reads every name through ``__getitem__``).
NOT_THE_PAGES = ("markus/core/input.py", "django/utils/datastructures.py")


@pytest.fixture
def recorded_reads(monkeypatch) -> list[tuple[int, str]]:
    """(id of the ``QueryDict``, name or EVERY) for every read of a request's parameters."""
    reads: list[tuple[int, str]] = []

    def wrap(name: str, every: bool) -> Callable[..., Any]:
        original = getattr(QueryDict, name)

        def read(self: QueryDict, *args: Any, **kwargs: Any) -> Any:
            if not sys._getframe(1).f_code.co_filename.endswith(NOT_THE_PAGES):
                reads.append((id(self), EVERY if every or not args else str(args[0])))
            return original(self, *args, **kwargs)

        return read

    for name in EVERY_NAME_READERS:
        monkeypatch.setattr(QueryDict, name, wrap(name, True))
    for name in ONE_NAME_READERS:
        monkeypatch.setattr(QueryDict, name, wrap(name, False))
    return reads


def test_no_page_answers_junk_in_a_parameter_or_a_field_with_a_server_error(
    alice, agent, team, unrecorded_templates, recorded_reads
):
    alice.is_staff = alice.is_superuser = True  # every page and action is open to her
    alice.save()
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    failed = []
    swept = 0
    for url in _urls(agent, team, alice):
        # Per method: the names this page was seen to read, and the list it is given
        # when it reads them all.
        read_by: dict[str, tuple[set[str], list[str]]] = {"get": (set(), PARAMS), "post": (set(), FIELDS)}

        def send(method: str, data: dict[str, str], what: str) -> None:
            nonlocal swept
            swept += 1
            recorded_reads.clear()
            response = getattr(client, method)(url, data)  # noqa: B023 (sent at once, in this URL's loop)
            if response.status_code >= 500:
                value = str(next(iter(data.values()), ""))[:12]
                failed.append((method.upper(), url, what, value, response.status_code))  # noqa: B023
            request = response.wsgi_request
            mine = id(request.GET if method == "get" else request.POST)
            read = {name for owner, name in recorded_reads if owner == mine}
            names, every = read_by[method]  # noqa: B023
            names |= set(every) if EVERY in read else read - {EVERY}

        for method in ("get", "post"):
            send(method, {}, "nothing")
            for value in JUNK:
                send(method, dict.fromkeys(read_by[method][1], value), "every name")
        sent: set[tuple[str, str, str]] = set()
        while todo := [  # to a fixed point: the names a junk request opened are swept too
            (method, name, value)
            for method, (names, _) in read_by.items()
            for name in sorted(names)
            for value in JUNK
            if (method, name, value) not in sent
        ]:
            for method, name, value in todo:
                sent.add((method, name, value))
                send(method, {name: value}, name)
    assert failed == []
    assert swept > 500, f"only {swept} requests: the reads were not recorded"
