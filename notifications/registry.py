"""USER_NOTIFICATION_TYPE_REGISTRY (seed section 12.2), defined once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class NotificationType(StrEnum):
    APPROVAL_REQUEST = "approval_request"
    TASK_CREATED = "task_created"
    TASK_COMPLETED = "task_completed"
    TASK_REVIEW = "task_review"
    TASK_FAILED = "task_failed"
    TASK_BLOCKED = "task_blocked"
    REQUIREMENT_CREATED = "requirement_created"
    REQUIREMENT_DECISION = "requirement_decision"
    AGENT_REPORT = "agent_report"
    COMMENT_MENTION = "comment_mention"
    BUDGET_EXHAUSTED = "budget_exhausted"
    AGENT_STALLED = "agent_stalled"
    SYSTEM = "system"


@dataclass(frozen=True)
class NotificationTypeDescriptor:
    label: str
    icon: str
    default_priority: str  # low | normal | high | urgent
    action: str  # navigate | open_chat | none
    category: str


N = NotificationType
_D = NotificationTypeDescriptor
USER_NOTIFICATION_TYPE_REGISTRY: dict[NotificationType, NotificationTypeDescriptor] = {
    N.APPROVAL_REQUEST: _D("Approval Request", "🔐", "high", "navigate", "approval"),
    N.TASK_CREATED: _D("Task Created", "📋", "normal", "navigate", "task"),
    N.TASK_COMPLETED: _D("Task Completed", "✅", "normal", "navigate", "task"),
    N.TASK_REVIEW: _D("Task Review", "👁️", "normal", "navigate", "task"),
    N.TASK_FAILED: _D("Task Failed", "❌", "high", "navigate", "task"),
    # A task waits on a dependency that can never complete (markus.work.dead_ends).
    N.TASK_BLOCKED: _D("Task Blocked", "⛔", "high", "navigate", "task"),
    N.REQUIREMENT_CREATED: _D("Requirement Proposed", "📝", "high", "navigate", "task"),
    N.REQUIREMENT_DECISION: _D("Requirement Decision", "⚖️", "normal", "navigate", "task"),
    N.AGENT_REPORT: _D("Agent Report", "📊", "normal", "none", "agent"),
    # Someone @mentioned the user in a task or requirement comment (issue 13).
    N.COMMENT_MENTION: _D("Mention", "@", "high", "navigate", "task"),
    # An agent's or a team's budget is used up: its agents take no LLM work (markus.usage).
    N.BUDGET_EXHAUSTED: _D("Budget Exhausted", "💸", "high", "navigate", "agent"),
    # An agent has made no progress for a while (attention.stalls).
    N.AGENT_STALLED: _D("Agent Stalled", "⏳", "high", "navigate", "agent"),
    N.SYSTEM: _D("System", "⚙️", "normal", "none", "system"),
}
PRIORITIES = ("low", "normal", "high", "urgent")
