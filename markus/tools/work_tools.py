"""Task and requirement tools. Every call acts as the calling agent (permission checks
live in the work services); refusals come back as readable errors."""

from __future__ import annotations

from django.http import Http404

from attention import scenarios as sc
from attention.toolbox import ToolContext, ToolError, tool
from mailbox.models import MailboxItem
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.work import services
from markus.work.errors import WorkNotFound
from markus.work.models import Requirement, Task, TaskState
from markus.work.selectors import (
    access_requirement,
    access_task,
    comment_data,
    quiet_note,
    requirement_comments,
    requirement_data,
    requirements_visible_to,
    task_comments,
    task_data,
    tasks_visible_to,
    with_dependencies,
)

# Tool names are what saved LLM sessions refer to: written here, not derived from the
# mailbox types they happen to share a spelling with.
TASK_COMMENT = "task_comment"  # a tool name, not a mailbox type
REQUIREMENT_COMMENT = "requirement_comment"  # a tool name, not a mailbox type
# Where each tool is offered (a tool a scenario does not need is not offered there;
# the prompts and the items' texts name only tools offered with them).
# Looking work up: everywhere but the dream (triage and deliberation read too).
READING = frozenset(sc.SCENARIOS) - {sc.DREAM_CYCLE}
# Commenting: wherever the prompt's guidance says to @mention a person in a comment.
COMMENTING = sc.HUMAN_GUIDANCE_SCENARIOS
# Filing a task: while executing one, for a requirement one is in charge of (its item
# says "task_create with requirement_id"), or when a colleague asks for it. Not in a
# chat: a person files work on the work pages.
FILING = frozenset({sc.TASK_EXECUTION, sc.REQUIREMENT_ACTION, sc.A2A})
# Changing a task's status: the executor fails it, the reviewer completes it or sends
# it back, a comment or a colleague asks for a change, a requirement's change cancels.
MOVING = frozenset({sc.TASK_EXECUTION, sc.REVIEW, sc.COMMENT_RESPONSE, sc.REQUIREMENT_ACTION, sc.A2A})
# Submitting one's own task for review: the execution.
SUBMITTING = frozenset({sc.TASK_EXECUTION})
# Proposing a requirement: a need found while executing, or next to one's requirement.
PROPOSING = frozenset({sc.TASK_EXECUTION, sc.REQUIREMENT_ACTION})
# Resubmitting a rejected requirement: its update (it says so) or a comment asking for it.
RESUBMITTING = frozenset({sc.REQUIREMENT_ACTION, sc.COMMENT_RESPONSE})


def _actor(ctx: ToolContext) -> Actor:
    return Actor.for_agent(Agent.objects.get(id=ctx.agent_id))


def _task(ctx: ToolContext, task_id: str) -> Task:
    try:
        return access_task(_actor(ctx), task_id)
    except (WorkNotFound, Http404) as exc:
        task = Task.objects.filter(id=task_id).first() if _mentioned_on(ctx, "taskId", task_id) else None
        if task is None:
            raise ToolError(f"no task {task_id!r} that you can see") from exc
        return task


def _mentioned_on(ctx: ToolContext, key: str, object_id: str) -> bool:
    """A mention invites the agent into the thread it came from: while it answers the
    mention it reads that task or requirement and comments there, even one it does not
    otherwise see (the scenario offers only reading and commenting)."""
    if ctx.scenario != sc.MENTION_RESPONSE or not ctx.mailbox_item_id:
        return False
    item = MailboxItem.objects.filter(id=ctx.mailbox_item_id, agent_id=ctx.agent_id).first()
    return item is not None and item.payload.get(key) == object_id


S = {"type": "string"}


@tool(
    "task_list",
    "List tasks you can see (yours, ones you review or created), optionally by status.",
    {"type": "object", "properties": {"status": S}},
    scenarios=READING,
)
def task_list(ctx: ToolContext, args: dict) -> dict:
    rows = tasks_visible_to(_actor(ctx))
    if args.get("status"):
        rows = rows.filter(status=args["status"])
    return {"tasks": [task_data(t) for t in with_dependencies(rows.order_by("-updated_at"))[:50]]}


@tool(
    "task_get",
    "Fetch a task with all its comments.",
    {"type": "object", "properties": {"task_id": S}, "required": ["task_id"]},
    scenarios=READING,
)
def task_get(ctx: ToolContext, args: dict) -> dict:
    task = _task(ctx, args["task_id"])
    return {**task_data(task), "comments": task_comments(task)}


@tool(
    "task_create",
    "Create a task, optionally assigned to an agent and with a reviewer.",
    {
        "type": "object",
        "properties": {"title": S, "description": S, "assignee_id": S, "reviewer_id": S, "requirement_id": S},
        "required": ["title"],
    },
    scenarios=FILING,
)
def task_create(ctx: ToolContext, args: dict) -> dict:
    task = services.task_create(
        actor=_actor(ctx),
        title=args["title"],
        description=args.get("description") or "",
        assignee_id=args.get("assignee_id"),
        reviewer_agent_id=args.get("reviewer_id"),
        requirement_id=args.get("requirement_id"),
    )
    return task_data(task)


@tool(
    "task_update",
    "Change a task's status (a reviewer: completed, or in_progress to send it back; failed or cancelled with "
    "the reason in note). cascade true with cancelled also cancels the tasks waiting on it.",
    {
        "type": "object",
        "properties": {"task_id": S, "status": S, "note": S, "cascade": {"type": "boolean"}},
        "required": ["task_id", "status"],
    },
    scenarios=MOVING,
)
def task_update(ctx: ToolContext, args: dict) -> dict:
    _task(ctx, args["task_id"])
    task = services.task_transition(
        task_id=args["task_id"],
        to_status=args["status"],
        actor=_actor(ctx),
        note=args.get("note") or "",
        cascade=args.get("cascade") is True,
    )
    return task_data(task)


@tool(
    TASK_COMMENT,
    "Comment on a task; reply_to_comment_id links your reply to a comment.",
    {
        "type": "object",
        "properties": {"task_id": S, "content": S, "reply_to_comment_id": S},
        "required": ["task_id", "content"],
    },
    scenarios=COMMENTING,
)
def task_comment(ctx: ToolContext, args: dict) -> dict:
    _task(ctx, args["task_id"])
    comment = services.task_comment_create(
        task_id=args["task_id"],
        actor=_actor(ctx),
        content=args["content"],
        reply_to_comment_id=args.get("reply_to_comment_id"),
        activity_id=ctx.activity_id,
    )
    return {**comment_data(comment), **quiet_note(comment)}


@tool(
    "task_submit_review",
    "Submit your task for review when the work is done; summary: your deliverables.",
    {"type": "object", "properties": {"task_id": S, "summary": S}, "required": ["task_id"]},
    scenarios=SUBMITTING,
)
def task_submit_review(ctx: ToolContext, args: dict) -> dict:
    task = _task(ctx, args["task_id"])
    if task.assignee_id != ctx.agent_id:
        raise ToolError("only the assignee submits a task for review")
    task = services.task_transition(
        task_id=task.id, to_status=TaskState.REVIEW, actor=_actor(ctx), note=args.get("summary") or ""
    )
    return task_data(task)


@tool(
    "requirement_propose",
    "Propose a requirement (a human approves it; at most 3 pending).",
    {"type": "object", "properties": {"title": S, "description": S}, "required": ["title"]},
    scenarios=PROPOSING,
)
def requirement_propose(ctx: ToolContext, args: dict) -> dict:
    req = services.requirement_create(actor=_actor(ctx), title=args["title"], description=args.get("description") or "")
    return requirement_data(req)


@tool(
    "requirement_list",
    "List requirements you can see, optionally by status.",
    {"type": "object", "properties": {"status": S}},
    scenarios=READING,
)
def requirement_list(ctx: ToolContext, args: dict) -> dict:
    rows = requirements_visible_to(_actor(ctx))
    if args.get("status"):
        rows = rows.filter(status=args["status"])
    return {"requirements": [requirement_data(r) for r in rows.order_by("-updated_at")[:50]]}


def _requirement(ctx: ToolContext, rid: str) -> Requirement:
    try:
        return access_requirement(_actor(ctx), rid)
    except (WorkNotFound, Http404) as exc:
        found = Requirement.objects.filter(id=rid).first() if _mentioned_on(ctx, "requirementId", rid) else None
        if found is None:
            raise ToolError(f"no requirement {rid!r} that you can see") from exc
        return found


@tool(
    "requirement_get",
    "Fetch a requirement with its comments.",
    {"type": "object", "properties": {"requirement_id": S}, "required": ["requirement_id"]},
    scenarios=READING,
)
def requirement_get(ctx: ToolContext, args: dict) -> dict:
    req = _requirement(ctx, args["requirement_id"])
    return {**requirement_data(req), "comments": requirement_comments(req)}


@tool(
    REQUIREMENT_COMMENT,
    "Comment on a requirement; reply_to_comment_id as for task_comment.",
    {
        "type": "object",
        "properties": {"requirement_id": S, "content": S, "reply_to_comment_id": S},
        "required": ["requirement_id", "content"],
    },
    scenarios=COMMENTING,
)
def requirement_comment(ctx: ToolContext, args: dict) -> dict:
    _requirement(ctx, args["requirement_id"])
    comment = services.requirement_comment_create(
        requirement_id=args["requirement_id"],
        actor=_actor(ctx),
        content=args["content"],
        reply_to_comment_id=args.get("reply_to_comment_id"),
        activity_id=ctx.activity_id,
    )
    return {**comment_data(comment), **quiet_note(comment)}


@tool(
    "requirement_resubmit",
    "Resubmit a rejected requirement, optionally reworded.",
    {
        "type": "object",
        "properties": {"requirement_id": S, "title": S, "description": S},
        "required": ["requirement_id"],
    },
    scenarios=RESUBMITTING,
)
def requirement_resubmit(ctx: ToolContext, args: dict) -> dict:
    _requirement(ctx, args["requirement_id"])
    req = services.requirement_resubmit(
        requirement_id=args["requirement_id"],
        actor=_actor(ctx),
        title=args.get("title"),
        description=args.get("description"),
    )
    return requirement_data(req)
