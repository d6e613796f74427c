"""The mailbox items the work app sends agents, and their texts.

Every item goes through ``mailbox_enqueue`` (inside the caller's transaction); the
texts are what the agent's LLM reads, so they say what happened and what, if
anything, is expected.
"""

from __future__ import annotations

from typing import Any

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Priority
from mailbox.services import mailbox_enqueue
from markus.core.actors import Actor

from .errors import IllegalTransition
from .models import Requirement, Task, TaskComment, TaskState


def _assignee_id(task: Task) -> str:
    """The assignee an execution or assignment notice goes to (the callers check there is one)."""
    if task.assignee_id is None:
        raise IllegalTransition(f"task {task.id} has no assignee to work on it")
    return task.assignee_id


def _enqueue(
    agent_id: str,
    source_type: MailboxType,
    payload: dict[str, Any],
    *,
    priority: int | None = None,
    metadata: dict[str, Any] | None = None,
    marks: dict[str, Any] | None = None,
) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=source_type,
        payload=payload,
        priority=priority,
        metadata=metadata or {},
        marks=marks,
    )


# ---------------------------------------------------------------------------- tasks


def send_task_execution(
    task: Task, *, actor: Actor, from_status: str, note: str = "", resumed: bool = False, reason: str = ""
) -> MailboxItem:
    """The execution trigger (seed 3.4): it is the assignee's notification too.
    ``reason``: why a resumed execution was sent again (recorded on the item). It names
    the task, never as a command: told "Execute task: <title>", the real small model
    called a tool named after the title, at the first turn of 4 trials in 4 (the git
    tools offered or not); told "Task assigned to you", it called for a git tool."""
    lines = [f'You are assigned the task "{task.title}" ({task.id}), execution round {task.execution_round}.']
    if resumed:
        lines.append("Resumed after a restart: check what was already done (task_get, comments) before continuing.")
    elif from_status == TaskState.REVIEW:
        lines.append("The reviewer sent it back for revision: read the latest comments (task_get) first.")
    if note:
        lines.append(f"Note from {actor.name}: {note}")
    if task.description:
        lines.append(f"\n{task.description}")
    lines.append(
        "\nWhen the work is done, submit it for review with task_submit_review; a worker cannot complete its own task."
    )
    extra: dict[str, Any] = {"triggerExecution": True, "executionRound": task.execution_round}
    if resumed:
        extra["resumed"] = True
    return _enqueue(
        _assignee_id(task),
        MailboxType.TASK_STATUS_UPDATE,
        {
            "summary": f"Task assigned to you: {task.title}",
            "content": "\n".join(lines),
            "taskId": task.id,
            "extra": extra,
        },
        priority=Priority.HIGH,
        metadata={**actor.sender_metadata(), "fromStatus": from_status, "toStatus": task.status},
        marks={"repairReason": reason} if reason else None,
    )


def send_task_status_info(agent_id: str, task: Task, *, actor: Actor, from_status: str, note: str = "") -> MailboxItem:
    """An informational status update: logged by the loop without an LLM call."""
    by = "" if actor.kind == "system" else f" by {actor.name}"
    content = f'Task "{task.title}" ({task.id}) moved from {from_status} to {task.status}{by}.'
    if note:
        content += f"\nNote: {note}"
    content += "\nInformational: the system has already acted on this change; no action is needed."
    return _enqueue(
        agent_id,
        MailboxType.TASK_STATUS_UPDATE,
        {
            "summary": f"Task {task.status}: {task.title}",
            "content": content,
            "taskId": task.id,
            "extra": {"fromStatus": from_status, "toStatus": task.status},
        },
        metadata={**actor.sender_metadata(), "fromStatus": from_status, "toStatus": task.status},
    )


def send_task_assigned(task: Task, *, actor: Actor, waiting_for: list[str]) -> MailboxItem:
    content = f'You were assigned task "{task.title}" ({task.id}); it is {task.status}.'
    if waiting_for:
        content += f" It starts by itself once these tasks are completed: {', '.join(waiting_for)}."
    content += "\nInformational: no action is needed until it starts."
    return _enqueue(
        _assignee_id(task),
        MailboxType.TASK_STATUS_UPDATE,
        {
            "summary": f"Task assigned: {task.title}",
            "content": content,
            "taskId": task.id,
            "extra": {"fromStatus": None, "toStatus": task.status},
        },
        metadata={**actor.sender_metadata(), "toStatus": task.status},
    )


def send_review_request(reviewer_id: str, task: Task, *, actor: Actor, reason: str = "") -> MailboxItem:
    """The reviewer's item for this review round (``extra.reviewRound`` is the task's
    execution round: two rounds are two items). ``reason``: why it was sent again."""
    content = (
        f'Please review task "{task.title}" ({task.id}), submitted by {actor.name}.\n'
        "Read the task and its comments with task_get. Then either complete it "
        '(task_update status "completed") or send it back for revision '
        '(task_update status "in_progress") with a comment that says what to change.'
    )
    if task.deliverables:
        content += f"\n\nDeliverables (the assignee's note):\n{task.deliverables}"
    if task.description:
        content += f"\n\nTask description:\n{task.description}"
    return _enqueue(
        reviewer_id,
        MailboxType.REVIEW_REQUEST,
        {
            "summary": f"Review requested: {task.title}",
            "content": content,
            "taskId": task.id,
            "extra": {"reviewRound": task.execution_round},
        },
        metadata={**actor.sender_metadata(), "assigneeId": task.assignee_id},
        marks={"repairReason": reason} if reason else None,
    )


# ---------------------------------------------------------------------------- comments

_PROTOCOL = """MANDATORY before you reply (context-first protocol):
1. Fetch the full {kind} with {getter}("{id}") to get its complete current state.
2. Read ALL previous comments in the thread, not only this one.
3. Identify the commenter's intent: a question, a request, feedback, an objection...
4. Check related context: referenced tasks, requirements or files.
Only then reply, once, with {commenter} (reply_to_comment_id="{comment_id}").
If several comments are bundled here (separated by ---), answer them in ONE consolidated
reply: use reply_to_comment_id for the most important one and quote the others inline."""


def comment_text(
    *,
    kind: str,
    obj: Task | Requirement,
    actor: Actor,
    content: str,
    comment_id: str,
    reply_to: tuple[str, str] | None,
    streak: int,
    mention: bool = False,
) -> str:
    """The notification text of a comment, with the section 3.5 instructions."""
    # The agent tools are named after the kind: task_get / requirement_get, ..._comment.
    getter, commenter = f"{kind}_get", f"{kind}_comment"
    verb = "mentioned you in a comment on" if mention else "commented on"
    lines = [f'{actor.name} ({actor.kind}) {verb} {kind} "{obj.title}" ({obj.id}, status {obj.status}):', "", content]
    if reply_to is not None:
        lines += ["", f'(In reply to {reply_to[0]}: "{reply_to[1]}")']
    lines += ["", _PROTOCOL.format(kind=kind, getter=getter, id=obj.id, commenter=commenter, comment_id=comment_id)]
    if streak >= 2:
        lines += [
            "",
            f"Agent streak: the last {streak} comments in this thread are all from agents. "
            "Reply only if it adds something a human needs; otherwise stay silent.",
        ]
    return "\n".join(lines)


def send_comment(
    agent_id: str,
    *,
    kind: str,
    obj: Task | Requirement,
    actor: Actor,
    text: str,
    comment_id: str,
    streak: int,
    mention: bool,
) -> MailboxItem:
    if mention:
        source_type = MailboxType.MENTION
        summary = f"{actor.name} mentioned you on {kind}: {obj.title}"
    else:
        source_type = MailboxType.TASK_COMMENT if kind == "task" else MailboxType.REQUIREMENT_COMMENT
        summary = f"{actor.name} commented on {kind}: {obj.title}"
    key = "taskId" if kind == "task" else "requirementId"
    return _enqueue(
        agent_id,
        source_type,
        {"summary": summary, "content": text, key: obj.id},
        metadata={**actor.sender_metadata(), "commentId": comment_id, "agentStreak": streak},
    )


def send_session_reply(
    agent_id: str,
    *,
    task: Task,
    actor: Actor,
    comment: TaskComment,
    reply_to: tuple[str, str] | None,
    execution: MailboxItem | None,
) -> MailboxItem:
    """A person's comment on a task the agent already finished (issue 13). The item is
    about the task (``taskId``) and carries the comment and its author in ``extra``,
    with ``executionItemId``: the execution whose saved session is the task's own, for
    the attention loop to resume it."""
    lines = [
        f'{actor.name} ({actor.kind}) commented on task "{task.title}" ({task.id}), which you already worked on; '
        f"it is now status {task.status}:",
        "",
        comment.content,
    ]
    if reply_to is not None:
        lines += ["", f'(In reply to {reply_to[0]}: "{reply_to[1]}")']
    lines += [
        "",
        "This continues your work on that task. Read the comment (and the whole thread with "
        f'task_get("{task.id}") if you need it), then answer {actor.name} once with '
        f'task_comment (task_id="{task.id}", reply_to_comment_id="{comment.id}"). '
        "Do not redo the work unless you are asked to.",
    ]
    extra: dict[str, Any] = {
        "commentId": comment.id,
        "comment": comment.content,
        "authorId": actor.id,
        "authorName": actor.name,
        "authorRole": actor.kind,
        "taskStatus": task.status,
        "executionItemId": execution.id if execution is not None else None,
        "executionRound": task.execution_round,
    }
    return _enqueue(
        agent_id,
        MailboxType.SESSION_REPLY,
        {
            "summary": f"{actor.name} commented on your {task.status} task: {task.title}",
            "content": "\n".join(lines),
            "taskId": task.id,
            "extra": extra,
        },
        metadata={**actor.sender_metadata(), "commentId": comment.id},
    )


# ---------------------------------------------------------------------------- requirements


def send_requirement_update(
    agent_id: str,
    requirement: Requirement,
    *,
    actor: Actor,
    from_status: str | None,
    content: str,
    action_required: bool = False,
    priority: int | None = None,
    summary: str | None = None,
) -> MailboxItem:
    extra: dict[str, Any] = {"fromStatus": from_status, "toStatus": requirement.status}
    if action_required:
        extra["actionRequired"] = True
    return _enqueue(
        agent_id,
        MailboxType.REQUIREMENT_UPDATE,
        {
            "summary": summary or f"Requirement {requirement.status}: {requirement.title}",
            "content": content,
            "requirementId": requirement.id,
            "extra": extra,
        },
        priority=priority,
        metadata={**actor.sender_metadata(), "fromStatus": from_status, "toStatus": requirement.status},
    )
