"""What the mind view shows: filters, the attention header and timeline pages.

Labels, icons, categories and status colours are read from the mailbox registry when a
page or partial is rendered, never written into a template: a type added to the
registry shows up (and is filterable) with no template change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import Case, IntegerField, Prefetch, Q, QuerySet, Value, When
from django.http import Http404, QueryDict
from django.shortcuts import get_object_or_404
from django.utils import timezone

from agentbus.selectors import inbox_state
from attention import heartbeat, operator
from attention import services as attention
from attention.loop import attention_snapshot
from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from attention.selectors import timeline_entry, waiting_calls
from attention.stalls import stalls_of
from mailbox.models import MailboxItem
from mailbox.registry import STATUS_COLOURS, Category, MailboxType, Status, descriptor, registry_for_ui
from mailbox.representation import PLACEHOLDER
from mailbox.selectors import depth_label, queue_depth, timeline_queryset
from markus.agents import permissions
from markus.agents.models import Agent
from markus.console import services as console
from markus.core.actors import Actor
from markus.llm.base import get_provider
from markus.reports import clock, reminders
from markus.reports import services as reports
from markus.reports.models import DailyReport
from markus.reports.rendering import render_markdown
from markus.work.models import TaskState
from markus.work.selectors import tasks_visible_to

PAGE_SIZE = 30
OFFLINE_BRAIN = "offline"


@dataclass(frozen=True)
class MindFilters:
    """The timeline's filters; values the registry does not know are dropped."""

    category: str = ""
    type: str = ""
    statuses: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: QueryDict | Mapping[str, list[str]]) -> MindFilters:
        """``query`` is a QueryDict or a ``parse_qs`` dict (name → list of values)."""

        def values(name: str) -> list[str]:
            raw = query.getlist(name) if hasattr(query, "getlist") else query.get(name, [])
            return [v for part in raw for v in part.split(",") if v]

        category = next((c for c in values("category") if c in Category._value2member_map_), "")
        kind = next((t for t in values("type") if t in MailboxType._value2member_map_), "")
        statuses = tuple(s.value for s in Status if s.value in values("status"))
        return cls(category=category, type=kind, statuses=statuses)

    def query_string(self) -> str:
        pairs = [("category", self.category), ("type", self.type), *(("status", s) for s in self.statuses)]
        return urlencode([(k, v) for k, v in pairs if v])

    def rows(self, agent_id: str) -> QuerySet[MailboxItem]:
        return timeline_queryset(
            agent_id,
            types=[self.type] if self.type else None,
            category=self.category or None,
            statuses=list(self.statuses) or None,
        )

    def matches(self, item: MailboxItem) -> bool:
        return (
            (not self.category or item.category == self.category)
            and (not self.type or item.source_type == self.type)
            and (not self.statuses or item.status in self.statuses)
        )


def filter_groups() -> list[dict[str, Any]]:
    """Categories (in the registry's order of categories), each with its types."""
    groups: dict[str, list[dict[str, Any]]] = {c.value: [] for c in Category}
    for entry in registry_for_ui():
        groups.setdefault(str(entry["category"]), []).append(entry)
    return [{"value": c, "label": c.replace("_", " ").title(), "types": types} for c, types in groups.items() if types]


def status_filters() -> list[dict[str, str]]:
    return [{"value": s.value, "label": s.value.title(), "colour": STATUS_COLOURS[s]} for s in Status]


def filters_context(filters: MindFilters) -> dict[str, Any]:
    return {"filters": filters, "filter_groups": filter_groups(), "status_filters": status_filters()}


def duration(start: Any, end: Any, *, whole: bool = False) -> str:
    """``1.4s`` (``1s`` if ``whole``: the focus clock, as mind.js ticks it), ``3m 05s``,
    ``2h 10m``: the time between two datetimes ("" if either is missing)."""
    if start is None or end is None:
        return ""
    seconds = max(0.0, (end - start).total_seconds())
    if seconds < 60:
        return f"{int(seconds)}s" if whole else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def focus_turns(item_id: str) -> int:
    """LLM turns so far on the focused item (its latest activity's requests)."""
    activity = AgentActivity.objects.filter(mailbox_item_id=item_id).order_by("-started_at", "-id").first()
    if activity is None:
        return 0
    return AgentActivityLog.objects.filter(activity=activity, type="llm_request").count()


def header_context(
    agent_id: str, *, live: bool = False, can_control: bool = False, reader: permissions.Reader = permissions.PUBLIC
) -> dict[str, Any]:
    """The attention header, read fresh: state, focus (with its turns), queue depth, run
    status, brain (an outside agent: its bus inbox), and whether the reader may use the
    controls."""
    agent = Agent.objects.get(id=agent_id)
    snap = attention_snapshot(agent_id)
    focus = reader.focus(snap["currentFocus"])
    if focus is not None:
        d = descriptor(focus["sourceType"])
        focus = {
            **focus,
            "icon": d.icon,
            "typeLabel": d.label,
            "turns": focus_turns(focus["mailboxItemId"]),
            "elapsed": duration(focus["startedAt"], timezone.now(), whole=True),
        }
    brain = get_provider().name
    return {
        # An outside agent reads its bus inbox: shown instead of a brain and a queue.
        "outside": inbox_state(agent_id) if agent.kind == Agent.Kind.EXTERNAL else None,
        "can_control": can_control,
        "agent": agent,
        "state": str(snap["state"]),
        "focus": focus,
        "queue_depth": depth_label(queue_depth(agent_id)),  # "1000+" past the cap
        "stall": stalls_of([agent_id])[agent_id],  # attention.stalls: why it is stuck, if it is
        "brain": brain,
        "offline_brain": brain == OFFLINE_BRAIN,
        "live": live,
        "rhythm": heartbeat.rhythm(agent),
        "waiting_calls": [
            {
                **c,
                "arguments_text": reader.text(c["privateTo"], json.dumps(c["arguments"], ensure_ascii=False)),
            }
            for c in waiting_calls(agent_id)
        ],
    }


def _with_details(rows: QuerySet[MailboxItem]) -> QuerySet[MailboxItem]:
    return rows.prefetch_related(
        Prefetch("decisions", queryset=AgentDecision.objects.order_by("created_at", "id")),
        Prefetch("activities", queryset=AgentActivity.objects.order_by("started_at", "id")),
    )


def _short(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def present(item: MailboxItem, reader: permissions.Reader = permissions.PUBLIC) -> dict[str, Any]:
    """A timeline entry (the API's shape, as ``reader`` may see it) plus what the page
    draws from the registry."""
    entry = reader.item(timeline_entry(item))
    entry["icon"] = descriptor(item.source_type).icon
    entry["colour"] = STATUS_COLOURS[Status(item.status)]
    content = item.content.strip() if reader.sees(entry["privateTo"]) else ""
    entry["content"] = content[:2000] if content and content != item.summary else ""
    if entry["activity"] is not None:
        entry["activity"]["tokensShort"] = _short(entry["activity"]["totalTokens"])
    entry["waited"] = duration(item.queued_at, item.started_at)  # queued → started
    entry["took"] = duration(item.started_at, item.completed_at)  # started → completed
    entry["retryable"] = not retry_refusal(item, entry["activity"])
    entry["retryConfirm"] = retry_confirmation(item)
    entry["droppable"] = item.status in (Status.QUEUED, Status.DEFERRED)
    return entry


def timeline_page(
    agent_id: str,
    filters: MindFilters,
    *,
    offset: int = 0,
    limit: int = PAGE_SIZE,
    reader: permissions.Reader = permissions.PUBLIC,
) -> dict[str, Any]:
    """One page of the timeline, newest first; ``next_offset`` is None on the last."""
    rows = list(_with_details(filters.rows(agent_id))[offset : offset + limit + 1])
    more = len(rows) > limit
    return {"entries": [present(i, reader) for i in rows[:limit]], "next_offset": offset + limit if more else None}


def load_item(agent_id: str, item_id: str) -> MailboxItem | None:
    return _with_details(MailboxItem.objects.filter(agent_id=agent_id, id=item_id)).first()


def activity_logs(
    agent: Agent, activity_id: str, reader: permissions.Reader = permissions.PUBLIC
) -> tuple[AgentActivity, list[AgentActivityLog]]:
    """The activity and its logs; those of a private conversation the reader may not
    see come with their content replaced."""
    activity = get_object_or_404(AgentActivity, agent=agent, id=activity_id)
    logs = list(AgentActivityLog.objects.filter(activity=activity).order_by("seq"))
    if not reader.sees(activity.private_to):
        for entry in logs:
            entry.content, entry.metadata = PLACEHOLDER, {}
    return activity, logs


# ------------------------------------------------------------------- the control room


class ControlRefused(Exception):
    """A control that does not apply now (answered 409 with this message)."""


def may_control(user: Any, agent: Agent) -> bool:
    """Whether the mind view offers its controls (pause, resume, wake, heartbeat, retry,
    drop, cancel a reminder): the ``control`` right of ``markus.agents.permissions``."""
    return permissions.user_may(user, permissions.Right.CONTROL, agent)


def control_agent(agent: Agent, action: str, user: Any) -> str:
    """pause / resume / wake / heartbeat through the services the API and the console
    use (a heartbeat: the admin's "Run a heartbeat now", in ``user``'s name)."""
    if action == "heartbeat-now":
        return heartbeat_now(agent, user)
    if action == "pause":
        attention.agent_pause(agent)
        return f"{agent.name} paused: the turn in flight stops at its next check."
    if action == "resume":
        attention.agent_resume(agent)
        return f"{agent.name} resumed."
    if not agent.is_running:
        raise ControlRefused(f"{agent.id} is {agent.status}; only a running internal agent has a loop to wake")
    attention.wake(agent.id)
    return f"{agent.name} woken."


RETRYABLE = "only a failed, dropped or deferred item can be retried"


def _failed(activity: Mapping[str, Any] | None) -> bool:
    """Whether the latest attempt at an item ended and failed (``timeline_entry``'s
    activity shape: ``endedAt``, ``success``)."""
    return activity is not None and activity.get("endedAt") is not None and not activity.get("success")


def latest_activity(item: MailboxItem) -> dict[str, Any] | None:
    """The item's latest activity as ``timeline_entry`` shows it (the latest started)."""
    row = (
        AgentActivity.objects.filter(mailbox_item_id=item.id)
        .order_by("-started_at", "-id")
        .values("success", "ended_at")
        .first()
    )
    return None if row is None else {"success": row["success"], "endedAt": row["ended_at"]}


def retry_refusal(item: MailboxItem, activity: Mapping[str, Any] | None) -> str:
    """Why the mind view does not retry ``item`` ("" when it may), ``activity`` being
    its latest (``latest_activity``). Narrower than ``attention.operator``'s rules:
    those re-queue a copy of any finished item, so a retry of an answered chat has the
    agent answer it again. Here a completed item is retried only when its last attempt
    failed; a dropped one gets a fresh copy, a deferred one resurfaces (unless parked
    for an approval); queued, processing and merged items are in hand already."""
    status = item.status
    if status == Status.DROPPED:
        return ""
    if status == Status.COMPLETED:
        if _failed(activity):
            return ""
        return f"{item.id} completed: it was handled, and a retry would have the agent do it again; {RETRYABLE}"
    if status == Status.DEFERRED:
        if item.marks.get("waitingForApproval") is True:
            return f"{item.id} waits for approval {item.marks.get('approvalId')}; answer it instead of retrying"
        return ""
    if status == Status.MERGED:
        return f"{item.id} was merged into {item.merged_into_id}; retry that item instead"
    return f"{item.id} is {status}; nothing to retry"


def retry_confirmation(item: MailboxItem) -> str:
    """What the Retry button asks before it posts."""
    if item.status == Status.DEFERRED:
        return "Retry now? The item is queued again at once, ahead of its deferral."
    return "Retry? A fresh copy of this item is queued and the agent handles it again."


def heartbeat_now(agent: Agent, user: Any) -> str:
    """One heartbeat item now (``console_heartbeat``); an external agent has none."""
    try:
        item = console.console_heartbeat(agent=agent, operator=user)
    except console.ConsoleError as exc:
        raise ControlRefused(str(exc)) from exc
    if item.status == Status.DROPPED:  # heartbeat collapse: one is open already
        return f"Heartbeat for {agent.name}: not queued ({item.drop_reason})."
    return f"Heartbeat queued for {agent.name} ({item.id})."


def retry_item(item: MailboxItem, user: Any) -> str:
    """The operator's retry (``attention.operator``), where ``retry_refusal`` allows it:
    a deferred item resurfaces in place; a failed or dropped one gets a fresh queued
    copy. Anything else is refused (409) before the operator's service is asked."""
    refusal = retry_refusal(item, latest_activity(item))
    if refusal:
        raise ControlRefused(refusal)
    if item.status != Status.DEFERRED:  # one retry in hand at a time (a second click)
        pending = (
            MailboxItem.objects.filter(agent_id=item.agent_id, metadata__retryOf=item.id)
            .filter(status__in=(Status.QUEUED, Status.PROCESSING, Status.DEFERRED))
            .values_list("id", flat=True)
            .first()
        )
        if pending is not None:
            raise ControlRefused(f"{item.id} was retried already as {pending}, which is not finished yet")
    try:
        result = operator.retry_item(item_id=item.id, operator=user)
    except operator.OperatorError as exc:
        raise ControlRefused(str(exc)) from exc
    if result.mode == "resurfaced":
        return f"{item.id} is queued again."
    if result.mode == "merged":
        return f"{item.id} retried; the copy merged into {result.item.merged_into_id}."
    return f"{item.id} retried as {result.item.id}."


def drop_item(item: MailboxItem, user: Any, reason: str) -> str:
    """The operator's drop: queued or deferred items only, with the operator's reason."""
    try:
        operator.drop_item(
            item_id=item.id, reason=(reason or "").strip()[:500] or "dropped from the mind view", operator=user
        )
    except operator.OperatorError as exc:
        raise ControlRefused(str(exc)) from exc
    return f"{item.id} dropped."


# ------------------------------------------------------------------- reminders and reports

MIND_REPORTS = 7
MIND_REMINDERS = 50


def reports_context(agent_id: str, *, message: str = "", message_error: bool = False) -> dict[str, Any]:
    """The reminders the agent set (pending ones, cancellable) and its latest daily reports."""
    # The soonest MIND_REMINDERS are listed, with the true count ("… and K more").
    views, total = reminders.pending_window(agent_id, limit=MIND_REMINDERS)
    pending = [v.as_dict() for v in views]
    for r in pending:  # "2026-12-01 14:00", in the agent's time zone
        r["when"] = str(r.get("localTime") or "")[:16].replace("T", " ")
    rows = reports.latest_reports(agent_id, limit=MIND_REPORTS)
    return {
        "reminders": pending,
        "reminders_pending": total,
        "reminders_more": total - len(pending),
        "reports": [{**reports.serialize_report(r), "html": render_markdown(r.content)} for r in rows],
        "reminder_message": message,
        "reminder_error": message_error,
    }


def report_page(agent: Agent, day: str) -> dict[str, Any]:
    """One daily report in full (its markdown as sanitised HTML), with the dates of the
    one before and after it (404 for a date without a report or not a date). Its date
    is the agent's local date, so its times are shown in the agent's zone too (``zone``,
    named on the page), not in the server's."""
    try:
        when = reports.parse_day(day)
    except reports.ReportError as exc:
        raise Http404(str(exc)) from exc
    rows = DailyReport.objects.filter(agent_id=agent.id)
    report = rows.filter(date=when).first()
    if report is None:
        raise Http404(f"No report of {agent.id} for {when.isoformat()}.")
    earlier = rows.filter(date__lt=when).order_by("-date").values_list("date", flat=True).first()
    later = rows.filter(date__gt=when).order_by("date").values_list("date", flat=True).first()
    revised = report.updated_at if (report.updated_at - report.created_at).total_seconds() >= 60 else None
    return {
        "report": report,
        "html": render_markdown(report.content),
        "zone": clock.agent_zone(agent).key,
        "day": when.isoformat(),
        "revised": revised,
        "earlier": earlier.isoformat() if earlier else "",
        "later": later.isoformat() if later else "",
    }


def cancel_reminder(agent: Agent, item_id: str, user: Any) -> str:
    """Drop a pending reminder; a missing one is a 404 (``MarkusError``), a fired one a
    ControlRefused."""
    try:
        reminders.reminder_cancel(agent_id=agent.id, item_id=item_id, by=user.get_username())
    except reminders.ReminderFired as exc:
        raise ControlRefused(str(exc)) from exc
    return f"Reminder {item_id} cancelled."


TASKS_SHOWN = 10  # the mind view's open tasks; the rest are on /work, filtered by the agent
OPEN_TASK_STATES = (TaskState.BLOCKED, TaskState.IN_PROGRESS, TaskState.REVIEW, TaskState.PENDING)


def open_tasks(agent_id: str, actor: Actor) -> dict[str, Any]:
    """The agent's open tasks the reader may see (the API's rule, ``tasks_visible_to``):
    first those that cannot go on (``blocked``, or waiting on a dependency that ended
    badly: ``blocked_reason``), then in progress, in review, pending; the latest change
    first within each. One statement: ``TASKS_SHOWN`` rows and whether there are more."""
    rank = Case(
        When(Q(status=TaskState.BLOCKED) | ~Q(blocked_reason=""), then=Value(0)),
        *(When(status=state, then=Value(i)) for i, state in enumerate(OPEN_TASK_STATES[1:], start=1)),
        output_field=IntegerField(),
    )
    rows = list(
        tasks_visible_to(actor)
        .filter(assignee_id=agent_id, status__in=OPEN_TASK_STATES)
        .annotate(rank=rank)
        .order_by("rank", "-updated_at", "-id")
        .only("id", "title", "status", "blocked_reason")[: TASKS_SHOWN + 1]
    )
    return {"open_tasks": rows[:TASKS_SHOWN], "open_tasks_more": len(rows) > TASKS_SHOWN}
