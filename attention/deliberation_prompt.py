"""What a deliberation reads: the brief of each waiting item (``deliberation_brief``) and
the first message listing them (``listing``: the items that tie for first place, the stale
ones offered, how many less urgent ones wait their turn)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from mailbox.merge import is_protected, is_strict, protection_reason
from mailbox.models import MailboxItem
from mailbox.selectors import QUEUE_DEPTH_CAP, depth_capped, depth_label
from markus.agents.memory import age_label

from .scenarios import PROMPT_QUEUE_LIMIT, prompt_summary, scenario_for
from .triage import candidate_brief


def deliberation_brief(item: MailboxItem) -> dict[str, Any]:
    return {
        **candidate_brief(item),
        "protected": is_protected(item),
        "strict": is_strict(item),
        "informational": scenario_for(item) is None,
    }


def listing(items: list[MailboxItem], depth: int) -> str:
    """The deliberation's first message: the items that tie for first place, then the
    stale ones offered, then how many less urgent items wait their turn."""
    now = timezone.now()
    head = items[0]
    tied = [i for i in items if i.priority == head.priority]
    stale = [i for i in items if i.priority != head.priority]
    lines = [
        f"[DELIBERATION MODE] {depth_label(depth)} item(s) wait in your mailbox. These {len(tied)} tie for first "
        f"(priority {head.priority}), in the order you would take them:"
    ]
    lines += [_line(item, now) for item in tied]
    if stale:
        lines.append("Also waiting, stale (informational, queued over 4 h ago; drop what is moot):")
        lines += [_line(item, now) for item in stale]
    rest = depth - len(items)
    more = f"over {QUEUE_DEPTH_CAP - len(items)}" if depth_capped(depth) else str(rest)  # past the cap
    if rest > 0:
        lines.append(
            f"- … and {more} more: less urgent ones (or more of these) wait their turn "
            f"(check_mailbox with offset {len(tied)} lists them)"
            if len(items) >= PROMPT_QUEUE_LIMIT  # a full listing: more of these may wait
            else f"{more} less urgent item(s) wait their turn after these (check_mailbox lists them)."
        )
    lines.append("Decide, then call complete_deliberation.")
    return "\n".join(lines)


def _line(item: MailboxItem, now: datetime) -> str:
    about = f" (task {item.task_id})" if item.task_id else ""
    about += f" (requirement {item.requirement_id})" if item.requirement_id else ""
    sender = (item.metadata or {}).get("senderName")
    summary = prompt_summary(item.summary or item.label)
    line = f"- {item.id} [priority {item.priority}] {item.source_type}{about}: {summary}"
    line += f" — queued {age_label(item.queued_at, now)}"
    if sender:
        line += f", from {sender}"
    if is_protected(item):
        line += f" — protected ({protection_reason(item)})"
    elif scenario_for(item) is None:
        line += " — informational"
    content = (item.content or "").strip()
    if content and content != item.summary:
        line += "\n    " + content[:300].replace("\n", " ")
    return line
