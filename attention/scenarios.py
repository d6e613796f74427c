"""Which scenario an item runs, and the prompts it runs with."""
from __future__ import annotations

from typing import Any

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, descriptor
from mailbox.selectors import queued_items
from markus.agents.models import Agent, ChatMessage, WorkingMemory
from markus.llm.base import COMPLETION_MARKER

T = MailboxType
CHAT = "chat"
TASK_EXECUTION = "task_execution"
COMMENT_RESPONSE = "comment_response"
# Scenarios in which a human waits for the answer: only merge is honoured at yield points.
NON_PREEMPTABLE = frozenset({CHAT})

REVIEW = "review"
REQUIREMENT_ACTION = "requirement_action"
# Items whose scenario is named after their type (the scenario string is the type's).
_SAME_NAME = (T.SESSION_REPLY, T.MENTION, T.SYSTEM_EVENT, T.HEARTBEAT, T.DAILY_REPORT, T.MEMORY_CONSOLIDATION)
HEARTBEAT, DAILY_REPORT, MEMORY_CONSOLIDATION = T.HEARTBEAT.value, T.DAILY_REPORT.value, T.MEMORY_CONSOLIDATION.value
_FIXED = {
    T.HUMAN_CHAT: CHAT,
    T.A2A_MESSAGE: "a2a",
    T.REVIEW_REQUEST: REVIEW,
    T.TASK_COMMENT: COMMENT_RESPONSE,
    T.REQUIREMENT_COMMENT: COMMENT_RESPONSE,
    **{t: t.value for t in _SAME_NAME},
}

INSTRUCTIONS = {
    CHAT: "A person is talking to you. Answer them directly and helpfully.",
    TASK_EXECUTION: "Execute the task. Use your tools; comment on the task as you go and submit it for review "
                    "when it is done. You cannot complete your own task.",
    COMMENT_RESPONSE: (
        "Someone commented. MANDATORY before you reply: 1. fetch the full item (task_get / requirement_get); "
        "2. read ALL previous comments; 3. identify the commenter's intent; 4. check related context. "
        "Several comments may be bundled, separated by ---: answer them in one consolidated reply, using "
        "reply_to_comment_id for the most important one."
    ),
    REVIEW: "You were asked to review a task. Read it, comment, and complete it or send it back.",
    REQUIREMENT_ACTION: "A requirement you proposed changed. Decide what to do next.",
    HEARTBEAT: "Periodic check-in: look at your mailbox and recent work; act only if something needs it.",
    DAILY_REPORT: "Write a short report of your day from your activity records.",
    MEMORY_CONSOLIDATION: "Consolidate your memory from your recent activity records.",
}


def scenario_for(item: MailboxItem) -> str | None:
    """The scenario to run, or None for an informational item (completed without an LLM)."""
    t = MailboxType(item.source_type)
    if t == T.TASK_STATUS_UPDATE:
        return TASK_EXECUTION if item.triggers_execution else None
    if t == T.REQUIREMENT_UPDATE:
        return REQUIREMENT_ACTION if item.extra.get("actionRequired") else None
    scenario = _FIXED.get(t)
    if scenario is None and not descriptor(t).invokes_llm:
        return None
    return scenario


def item_brief(item: MailboxItem) -> dict[str, Any]:
    return {"id": item.id, "type": item.source_type, "summary": item.summary, "content": item.content,
            "taskId": item.task_id, "requirementId": item.requirement_id, "priority": item.priority,
            "sender": (item.metadata or {}).get("senderName")}


def system_prompt(agent: Agent, item: MailboxItem, scenario: str) -> str:
    lines = [f"You are {agent.name}" + (f", {agent.role}." if agent.role else "."),
             INSTRUCTIONS.get(scenario, f"Handle this {item.label.lower()}.")]
    memory = list(WorkingMemory.objects.filter(agent=agent).order_by("key"))
    if memory:
        lines.append("## Working Memory")
        lines += [f"- {m.key}: {m.content}" for m in memory]
    queue = queued_items(agent.id)
    lines.append(f"## Mailbox ({len(queue)} waiting)")
    lines += [f"- [{q['priority']}] {q['sourceType']}: {q['summary']}" for q in queue]
    if scenario not in NON_PREEMPTABLE:
        lines.append(f"End your final answer with {COMPLETION_MARKER} when you have handled this item.")
    return "\n".join(lines)


def first_messages(item: MailboxItem, scenario: str, chat_session_id: str | None) -> list[dict[str, Any]]:
    """The opening messages of a new LLM session for the item."""
    messages: list[dict[str, Any]] = []
    if scenario == CHAT and chat_session_id:
        history = ChatMessage.objects.filter(session_id=chat_session_id, role__in=["user", "assistant"]).order_by(
            "-created_at", "-id")[:20]
        messages += [{"role": m.role, "content": m.content} for m in reversed(list(history))]
        messages.append({"role": "user", "content": item.content})
        return messages
    header = f"[{item.label}] {item.summary}".strip()
    if item.task_id:
        header += f" (task {item.task_id})"
    if item.requirement_id:
        header += f" (requirement {item.requirement_id})"
    messages.append({"role": "user", "content": f"{header}\n\n{item.content}".strip()})
    return messages


def merged_message(item: MailboxItem) -> dict[str, Any]:
    """How a merged item reaches the next LLM turn."""
    sender = (item.metadata or {}).get("senderName") or "someone"
    if item.source_type == MailboxType.HUMAN_CHAT:
        return {"role": "user", "content": item.content}
    return {"role": "user", "content": f"[{item.label} from {sender}] {item.summary}\n\n{item.content}".strip()}
