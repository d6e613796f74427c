"""The daily report's tool: ``submit_daily_report``, offered while the agent writes its
report (the daily-report scenario). The text is stored as the day's report and sent to
the agent's owner (markus.reports.services)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.utils import timezone

from attention import scenarios as sc
from attention.selectors import day_activity
from attention.toolbox import ToolContext, ToolError, tool
from mailbox.models import MailboxItem
from markus.agents.models import Agent
from markus.core.errors import MarkusError
from markus.reports import services as reports
from markus.reports.clock import local_day_bounds, local_now

# Submitting the report: the daily report's own.
REPORTING = frozenset({sc.DAILY_REPORT})


def _report_day(agent: Agent, item: MailboxItem | None) -> date:
    """The day the item asked a report for, else today in the agent's time zone."""
    raw = item.extra.get("date") if item is not None else None
    if isinstance(raw, str):
        try:
            return date.fromisoformat(raw)
        except ValueError:
            pass
    return local_now(agent, timezone.now()).date()


@tool(
    "submit_daily_report",
    "Submit your daily report (markdown text). It is stored as today's report and sent to your owner; "
    "submitting again the same day replaces the text.",
    {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]},
    scenarios=REPORTING,
)
def submit_daily_report(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    agent = Agent.objects.select_related("owner", "team__owner").get(id=ctx.agent_id)
    item = MailboxItem.objects.filter(id=ctx.mailbox_item_id).first() if ctx.mailbox_item_id else None
    day = _report_day(agent, item)
    start, end = local_day_bounds(agent, day)
    activity = day_activity(agent.id, start, end)
    activity["writtenBy"] = {"activityId": ctx.activity_id, "mailboxItemId": ctx.mailbox_item_id}
    try:
        report, created = reports.report_store(agent=agent, day=day, content=args["content"], activity=activity)
    except MarkusError as exc:
        raise ToolError(f"submit_daily_report: {exc}") from exc
    recipient = reports.report_recipient(agent)
    return {
        "reportId": report.pk,
        "date": day.isoformat(),
        "stored": True,
        "replaced": not created,
        "sentTo": recipient.get_username() if recipient is not None and created else None,
    }
