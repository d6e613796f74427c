"""The offline brain's daily report and reminders (issue 16).

Daily report: the report item lists the day's activities (markus.reports.services
``report_request``); the brain writes the report from that list, deterministically, and
submits it with ``submit_daily_report``. Reminder: it passes the reminder's text on to
the person with ``notify_user``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .offline_plan import LABEL, FinalFn, PlanFn, Step

# Scenario names (attention.scenarios) as the LLM sees them.
DAILY_REPORT, REMINDER_DUE = "daily_report_writing", "reminder_due"
# The line of the report item after which the day's activities are listed.
ACTIVITY_HEADING = "Today's activities:"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _report_date(item: dict[str, Any]) -> str:
    found = _DATE.search(str(item.get("summary") or ""))
    return found.group(0) if found else "today"


def report_text(item: dict[str, Any], agent: str) -> str:
    """The report, from the activities the item lists: counts by kind and the list."""
    content = str(item.get("content") or "")
    head, _, listed = content.partition(ACTIVITY_HEADING)
    lines = [line.strip() for line in listed.splitlines() if line.strip().startswith("- ")]
    done = [line for line in lines if line.endswith("(ok)")]
    failed = [line for line in lines if line.endswith("(failed)")]
    summary = next((line for line in head.splitlines() if line.startswith("Summary:")), "")
    parts = [
        f"# Daily report of {agent}, {_report_date(item)}",
        "",
        summary or f"{len(lines)} activities today.",
        f"{len(done)} done, {len(failed)} failed.",
        "",
        "## What I did",
        *(lines or ["- nothing recorded today"]),
    ]
    if failed:
        parts += ["", "## Needs attention", *failed]
    parts += ["", f"_Written by the {LABEL}._"]
    return "\n".join(parts)


def _report_plan(item: dict[str, Any], agent: str) -> list[Step]:
    return [("submit_daily_report", {"content": report_text(item, agent)})]


def _report_final(item: dict[str, Any], agent: str, results: dict[str, str]) -> str:
    try:
        stored = json.loads(results.get("submit_daily_report") or "{}")
    except json.JSONDecodeError:
        stored = {}
    if stored.get("stored"):
        return f"Daily report for {stored.get('date', _report_date(item))} submitted."
    return f"Daily report for {_report_date(item)} could not be submitted."


def _reminder_plan(item: dict[str, Any], agent: str) -> list[Step]:
    text = str(item.get("content") or item.get("summary") or "").strip()
    return [("notify_user", {"title": "Reminder", "body": text[:2000]})]


def _reminder_final(item: dict[str, Any], agent: str, results: dict[str, str]) -> str:
    said = "passed on" if "notify_user" in results else "noted"
    return f"{agent}: reminder “{str(item.get('summary') or '')[:200]}” {said}."


# What the offline brain (``markus.llm.offline``) reads of this area.
PLANS: dict[str, PlanFn] = {DAILY_REPORT: _report_plan, REMINDER_DUE: _reminder_plan}
FINALS: dict[str, FinalFn] = {DAILY_REPORT: _report_final, REMINDER_DUE: _reminder_final}
