"""The one merge rule: which items may fold together, and how their text folds.

Enqueue dedup (section 14), pre-triage consolidation (section 21), coalescing into the
head of the queue, recovery's de-duplication and the loop's merge decisions at a yield
point all ask ``may_merge``; none has exclusions of its own.

Strict-state items keep their own identity: a human's chat, an execution trigger, a
review request (two review rounds stay two items) and a requirement update that asks
for action. Such an item is never absorbed by another item (two chats of one person
excepted: a follow-up joins the chat it follows), and it absorbs another item only as
the *focus*: the item whose LLM session is open (a comment on the task being executed
is injected into that execution; it does not change what the execution is).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.utils import timezone

from .models import MailboxItem
from .registry import MESSAGE_SEPARATOR, MailboxType, descriptor

_PLUS = re.compile(r" \(\+(\d+)\)$")


def is_strict(item: MailboxItem) -> bool:
    """A strict-state item: what it asks for must happen as itself."""
    return _strict(item.source_type, item.payload)


def _strict(source_type: str, payload: dict[str, Any] | None) -> bool:
    if source_type in (MailboxType.HUMAN_CHAT, MailboxType.REVIEW_REQUEST):
        return True
    extra = (payload or {}).get("extra")
    if not isinstance(extra, dict):
        return False
    return bool(extra.get("triggerExecution")) or (
        source_type == MailboxType.REQUIREMENT_UPDATE and bool(extra.get("actionRequired"))
    )


def is_protected(item: MailboxItem) -> bool:
    """Never deferred, dropped or completed inline by the agent's triage: a human's chat
    or comment, a strict item (an execution trigger, a review request, a requirement
    update asking for action) and a direct mention."""
    return item.is_user_interaction or is_strict(item) or item.source_type == MailboxType.MENTION


def protection_reason(item: MailboxItem) -> str:
    if item.source_type == MailboxType.HUMAN_CHAT:
        return "a human's chat"
    if item.is_user_interaction:
        return "a human's comment"
    if item.triggers_execution:
        return "an execution trigger (its task waits for it)"
    if item.source_type == MailboxType.REVIEW_REQUEST:
        return "a review request"
    if item.source_type == MailboxType.MENTION:
        return "a direct mention"
    return f"a {item.label.lower()} that asks for action"


def entity_key(item: MailboxItem) -> tuple[str, str] | None:
    """The task (or else the requirement) an item is about, or None."""
    if item.task_id:
        return ("task", str(item.task_id))
    if item.requirement_id:
        return ("requirement", str(item.requirement_id))
    return None


def consolidation_key(item: MailboxItem) -> tuple[str, str] | None:
    """What queued items fold together by at the queue's read (section 21's pre-triage
    consolidation, and section 14's channel coalescing): the task or requirement an item
    is about (``entity_key``), or else an agent message's conversation, its
    ``extra.channelKey``. None: the item folds with nothing there."""
    key = entity_key(item)
    if key is not None:
        return key
    if item.source_type == MailboxType.A2A_MESSAGE:
        channel = dedup_key(item.source_type, item.payload or {})
        if channel is not None:
            return ("channel", channel)
    return None


def may_merge(target: MailboxItem, item: MailboxItem, *, into_focus: bool = False) -> bool:
    """May ``target`` absorb ``item``? ``into_focus``: the target is the item being
    worked on (its session open), so a strict target may take in a plain item."""
    if target.id == item.id or target.agent_id != item.agent_id:
        return False
    if item.source_type == MailboxType.HUMAN_CHAT:
        # One conversation: a chat folds only into a chat of its own session (the
        # reply goes there; another person's private session must not hear it).
        return target.source_type == MailboxType.HUMAN_CHAT and _session(target) == _session(item)
    if is_strict(item):
        return False
    return into_focus or not is_strict(target)


def _session(item: MailboxItem) -> Any:
    """The chat session an item was said in (None: the agent's main session)."""
    return (item.metadata or {}).get("sessionId")


def dedup_key(source_type: str, payload: dict[str, Any]) -> str | None:
    """The section 14 dedup group of a new item, or None if it never merges at enqueue.
    A type with ``one_queued`` has a single group per agent."""
    d = descriptor(source_type)
    if d.one_queued:
        return "*"
    if d.dedup_key is None or _strict(source_type, payload):
        return None
    value: Any = payload
    for part in d.dedup_key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return str(value) if value not in (None, "") else None


# ---------------------------------------------------------------------------- folding text


def bump_summary(summary: str, by: int = 1) -> str:
    """``X`` → ``X (+1)`` → ``X (+2)``: one suffix that counts the absorbed items."""
    match = _PLUS.search(summary)
    if match:
        return summary[: match.start()] + f" (+{int(match.group(1)) + by})"
    return f"{summary} (+{by})"


def sender_name(metadata: dict[str, Any] | None) -> str:
    metadata = metadata or {}
    return str(metadata.get("senderName") or metadata.get("senderId") or "unknown")


def _message_entry(payload: dict[str, Any], metadata: dict[str, Any] | None, at: datetime) -> dict[str, Any]:
    return {
        "senderId": (metadata or {}).get("senderId"),
        "senderName": sender_name(metadata),
        "content": str(payload.get("content", "")),
        "timestamp": at.isoformat(),
    }


def _said_by(entry: dict[str, Any]) -> str:
    return f"{entry['senderName']}: {entry['content']}"


def fold(target: MailboxItem, absorbed: MailboxItem, *, label_prefix: bool = False) -> None:
    """Fold ``absorbed`` into ``target`` in memory (the lifecycle saves both).

    Content is appended with the separator, the summary gains a ``(+N)`` suffix, the
    survivor keeps the highest priority (lowest number). Agent messages on one channel
    carry a ``messages`` array and name each sender in the text the LLM reads.
    """
    payload = dict(target.payload or {})
    incoming = absorbed.payload or {}
    text = str(incoming.get("content", ""))
    if target.source_type == MailboxType.A2A_MESSAGE and absorbed.source_type == MailboxType.A2A_MESSAGE:
        first = payload.get("messages") or [_message_entry(target.payload or {}, target.metadata, target.queued_at)]
        more = incoming.get("messages") or [_message_entry(incoming, absorbed.metadata, absorbed.queued_at)]
        payload["messages"] = [*first, *more]
        payload["content"] = MESSAGE_SEPARATOR.join(_said_by(m) for m in payload["messages"])
    elif not (descriptor(target.source_type).one_queued and text in str(payload.get("content", ""))):
        # (A second identical check-in adds nothing to read.)
        if label_prefix and absorbed.source_type != target.source_type:
            text = f"[{absorbed.label}] {text}"
        payload["content"] = f"{payload.get('content', '')}{MESSAGE_SEPARATOR}{text}"
    payload["summary"] = bump_summary(str(payload.get("summary", "")))
    if label_prefix:
        merged = list(payload.get("consolidated") or [])
        merged.append({"id": absorbed.id, "sourceType": absorbed.source_type, "summary": absorbed.summary})
        payload["consolidated"] = merged
    target.payload = payload
    target.priority = min(target.priority, absorbed.priority)
    absorbed.merged_into = target
    absorbed.completed_at = timezone.now()
