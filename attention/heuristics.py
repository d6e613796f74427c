"""Interrupt heuristics, evaluated at a yield point (rules of the TypeScript code).
First match wins; only the LLM judge (consulted when these say continue) can cancel."""

from __future__ import annotations

from dataclasses import dataclass

from mailbox.models import MailboxItem
from mailbox.registry import Category, MailboxType

from .models import DecisionType


@dataclass(frozen=True)
class Verdict:
    decision: str
    rule: str
    reason: str


def _sender(item: MailboxItem) -> str | None:
    return (item.metadata or {}).get("senderId")


def _session(item: MailboxItem) -> str | None:
    return (item.metadata or {}).get("sessionId")


def may_call_off(current: MailboxItem, new: MailboxItem) -> bool:
    """Only whoever asked for the current work may call it off: the new item comes from
    the same sender (a person, an agent). A heartbeat, an event, or someone else's
    message never cancels another's work (a weak judge cancelled an outside agent's
    request when a heartbeat arrived)."""
    return _sender(new) is not None and _sender(new) == _sender(current)


def may_preempt(current: MailboxItem, new: MailboxItem) -> bool:
    """Only an item at least as urgent may pause the current work (a larger number is
    less urgent): a heartbeat never pauses a request."""
    return new.priority <= current.priority


def heuristic_decision(current: MailboxItem, new: MailboxItem, *, stream_cancelled: bool = False) -> Verdict:
    T, D = MailboxType, DecisionType
    if (
        current.source_type == T.HUMAN_CHAT
        and new.source_type == T.HUMAN_CHAT
        and _sender(current) == _sender(new)
        and (not _session(current) or not _session(new) or _session(current) == _session(new))
        and not stream_cancelled
    ):
        return Verdict(D.MERGE, "R0", "Follow-up from the same user in the same chat — merged")
    if new.is_user_interaction and not current.is_user_interaction:
        return Verdict(D.PREEMPT, "R1", "A user interaction comes first")
    if new.source_type == T.A2A_MESSAGE and not current.is_user_interaction and current.source_type != T.A2A_MESSAGE:
        return Verdict(D.PREEMPT, "R1.5", "A message from another agent preempts background work")
    if new.source_type == T.TASK_COMMENT and current.task_id and new.task_id == current.task_id:
        return Verdict(D.MERGE, "R2", "Comment on the task being worked on — merged")
    if (
        new.source_type in (T.REQUIREMENT_UPDATE, T.REQUIREMENT_COMMENT)
        and current.requirement_id
        and new.requirement_id == current.requirement_id
    ):
        return Verdict(D.MERGE, "R3", "Update on the requirement being worked on — merged")
    if new.priority == 0 and current.priority > 0:
        return Verdict(D.PREEMPT, "R4", "Critical item arrived")
    if new.priority < current.priority:
        return Verdict(D.PREEMPT, "R6", "More urgent item arrived")
    if new.priority == current.priority and current.category == Category.SYSTEM:
        return Verdict(D.PREEMPT, "R8", "Equal priority and the current work is a system process")
    if new.source_type == T.MENTION and current.priority >= 2:
        return Verdict(D.PREEMPT, "R9", "Mentioned while on normal or lower priority work")
    return Verdict(D.CONTINUE, "continue", "Not urgent enough to interrupt")
