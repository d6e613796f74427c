"""Comments on tasks and requirements, and who hears about them (seed 3.5, 3.6, 15).

A comment notifies the assignee and the creator agent of a task (plus its watchers),
or the agent in charge of a requirement, never its own author. ``@name`` / ``@id``
mentions send ``mention`` items instead. While a task is in review, its reviewer's
comments notify nobody but the agents they mention: the outcome of a review travels
through the status transition, not through intermediate comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar

from django.db import transaction
from django.db.models import Q, QuerySet

from markus.agents.models import Agent
from markus.core.actors import Actor

from . import notices
from .errors import WorkError, WorkNotFound
from .inputs import clean_text
from .models import Requirement, RequirementComment, Task, TaskComment, TaskState
from .selectors import (
    REPLY_SNIPPET,
    actor_is_reviewer,
    agent_streak,
    agents_assignable_by,
    author_of,
    requirement_agent_id,
)

MAX_COMMENT_LENGTH = 20_000

_Comment = TypeVar("_Comment", TaskComment, RequirementComment)


def mentioned_agents(text: str, candidates: Iterable[Agent]) -> list[Agent]:
    """Agents named in ``text`` as ``@<id>`` or ``@<name>`` (case-insensitive; a name
    may hold spaces), in the order they are first mentioned."""
    lowered = text.lower()
    found: list[tuple[int, Agent]] = []
    for agent in candidates:
        positions = []
        for handle in {agent.id, agent.name}:
            pattern = r"(?<![\w@])@" + re.escape(handle.lower()) + r"(?![\w-])"
            match = re.search(pattern, lowered)
            if match:
                positions.append(match.start())
        if positions:
            found.append((min(positions), agent))
    return [agent for _, agent in sorted(found, key=lambda pair: (pair[0], pair[1].id))]


def _candidates(actor: Actor, participant_ids: Iterable[str | None], team_id: str | None) -> QuerySet[Agent]:
    ids = [p for p in participant_ids if p]
    query = Q(id__in=ids) | Q(id__in=agents_assignable_by(actor).values("id"))
    if team_id:
        query |= Q(team_id=team_id)
    return Agent.objects.filter(query).distinct()


def _reply_to(model: type[_Comment], reply_to_comment_id: object, **parent: Task | Requirement) -> _Comment | None:
    if reply_to_comment_id in (None, ""):
        return None
    reply_to = None
    if isinstance(reply_to_comment_id, str):
        reply_to = (
            model.objects.select_related("author_agent", "author_user").filter(id=reply_to_comment_id, **parent).first()
        )
    if reply_to is None:
        where = "task" if model is TaskComment else "requirement"
        raise WorkError(f"reply_to_comment_id {reply_to_comment_id!r} is not a comment on this {where}")
    return reply_to


def _activity_id(actor: Actor, activity_id: object) -> str | None:
    # Only an agent's comment links to the activity that wrote it (section 15).
    if not actor.is_agent:
        return None
    return clean_text(activity_id, "activity_id", max_length=64) or None


def _deliver(
    kind: str,
    obj: Task | Requirement,
    comment: TaskComment | RequirementComment,
    actor: Actor,
    *,
    recipients: list[str | None],
    candidates: QuerySet[Agent],
    reply_to: TaskComment | RequirementComment | None,
    streak: int,
) -> None:
    mentioned = [a for a in mentioned_agents(comment.content, candidates) if a.id != actor.agent_id]
    mentioned_ids = {a.id for a in mentioned}
    wanted = [r for r in dict.fromkeys(recipients) if r and r != actor.agent_id and r not in mentioned_ids]
    existing = set(Agent.objects.filter(id__in=wanted).values_list("id", flat=True))
    reply = (author_of(reply_to)[2], reply_to.content[:REPLY_SNIPPET]) if reply_to is not None else None
    for agent_id, mention in [*((a.id, True) for a in mentioned), *((r, False) for r in wanted if r in existing)]:
        text = notices.comment_text(
            kind=kind,
            obj=obj,
            actor=actor,
            content=comment.content,
            comment_id=comment.id,
            reply_to=reply,
            streak=streak,
            mention=mention,
        )
        notices.send_comment(
            agent_id, kind=kind, obj=obj, actor=actor, text=text, comment_id=comment.id, streak=streak, mention=mention
        )


@transaction.atomic
def task_comment_create(
    *,
    task_id: str,
    actor: Actor,
    content: str,
    reply_to_comment_id: str | None = None,
    activity_id: str | None = None,
) -> TaskComment:
    """Post a comment on a task and notify (section 3.5 payload, 3.6 suppression).
    ``activity_id`` is stored for agents only. The caller checks visibility."""
    content = clean_text(content, "content", max_length=MAX_COMMENT_LENGTH, required=True)
    task = Task.objects.filter(id=task_id).first()
    if task is None:
        raise WorkNotFound(f"no task {task_id!r}")
    reply_to = _reply_to(TaskComment, reply_to_comment_id, task=task)
    comment = TaskComment.objects.create(
        task=task,
        author_agent_id=actor.agent_id,
        author_user_id=actor.user_id,
        content=content,
        reply_to=reply_to,
        activity_id=_activity_id(actor, activity_id),
    )
    watchers = (task.metadata or {}).get("watchers") or []
    if task.status == TaskState.REVIEW and actor_is_reviewer(task, actor):
        recipients: list[str | None] = []  # section 3.6: only mentions get through
    else:
        recipients = [task.assignee_id, task.created_by_agent_id, *[w for w in watchers if isinstance(w, str)]]
    participants = [task.assignee_id, task.reviewer_agent_id, task.created_by_agent_id, *recipients]
    _deliver(
        "task",
        task,
        comment,
        actor,
        recipients=recipients,
        reply_to=reply_to,
        candidates=_candidates(actor, participants, task.team_id),
        streak=agent_streak(TaskComment.objects.filter(task=task)),
    )
    return comment


@transaction.atomic
def requirement_comment_create(
    *,
    requirement_id: str,
    actor: Actor,
    content: str,
    reply_to_comment_id: str | None = None,
    activity_id: str | None = None,
) -> RequirementComment:
    """Post a comment on a requirement; the agent in charge (and anyone mentioned) is
    notified. The caller checks visibility."""
    content = clean_text(content, "content", max_length=MAX_COMMENT_LENGTH, required=True)
    requirement = Requirement.objects.filter(id=requirement_id).first()
    if requirement is None:
        raise WorkNotFound(f"no requirement {requirement_id!r}")
    reply_to = _reply_to(RequirementComment, reply_to_comment_id, requirement=requirement)
    comment = RequirementComment.objects.create(
        requirement=requirement,
        author_agent_id=actor.agent_id,
        author_user_id=actor.user_id,
        content=content,
        reply_to=reply_to,
        activity_id=_activity_id(actor, activity_id),
    )
    agent_id = requirement_agent_id(requirement)
    _deliver(
        "requirement",
        requirement,
        comment,
        actor,
        recipients=[agent_id],
        reply_to=reply_to,
        candidates=_candidates(actor, [agent_id], requirement.team_id),
        streak=agent_streak(RequirementComment.objects.filter(requirement=requirement)),
    )
    return comment
