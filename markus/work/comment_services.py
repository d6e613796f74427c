"""Comments on tasks and requirements, and who hears about them (seed 3.5, 3.6, 15).

A comment notifies the assignee and the creator agent of a task (plus its watchers),
or the agent in charge of a requirement, never its own author. ``@name`` / ``@id``
mentions send ``mention`` items instead. While a task is in review, its reviewer's
comments notify nobody but the agents they mention: the outcome of a review travels
through the status transition, not through intermediate comments.

After the fact (issue 13): a person's comment on a task its assignee already worked on
and that has ended (a terminal state, at least one execution round) reaches the
assignee as one ``session_reply`` instead of a comment or a mention item, carrying what
resuming the task's own session needs; everybody else hears about it as before.

People are mentioned by username (``@bob``): each one who may see the task or
requirement gets one ``comment_mention`` notification per comment, never the author.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Lower

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent
from markus.core.actors import Actor
from notifications.registry import NotificationType
from notifications.services import notify_user

from . import history, notices
from .errors import WorkError, WorkNotFound
from .inputs import clean_text
from .models import Requirement, RequirementComment, Task, TaskComment, TaskState
from .selectors import (
    AGENT_STREAK_QUIET,
    REPLY_SNIPPET,
    actor_is_reviewer,
    agent_streak,
    agents_assignable_by,
    author_of,
    requirement_agent_id,
    requirements_visible_to,
    tasks_visible_to,
)
from .states import TERMINAL_TASK_STATES

MAX_COMMENT_LENGTH = 20_000
# How much of a comment a mention notification quotes.
MENTION_QUOTE = 280
# ``@handle`` not preceded by a word character or ``@`` (so not an e-mail address); a
# handle is a Django username: letters, digits and ``. @ + - _``.
_USER_HANDLE = re.compile(r"(?<![\w@])@(\w[\w.@+-]*)")

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


def mentioned_usernames(text: str) -> list[str]:
    """The lower-cased usernames ``text`` mentions as ``@username``, in order, once
    each; trailing punctuation (``@bob.``) is not part of the name."""
    names = [m.group(1).rstrip(".@+-").lower() for m in _USER_HANDLE.finditer(text)]
    return list(dict.fromkeys(name for name in names if name))


def _users_to_notify(text: str, obj: Task | Requirement, actor: Actor) -> list[User]:
    """The active users mentioned in ``text`` who may see ``obj``, but not its author."""
    names = mentioned_usernames(text)
    if not names:
        return []
    found: dict[str, User] = {
        u.username.lower(): u
        for u in get_user_model().objects.annotate(handle=Lower("username")).filter(handle__in=names, is_active=True)
    }
    users: list[User] = []
    for name in names:
        user = found.get(name)
        if user is None or user.pk == actor.user_id:
            continue
        seen = (
            tasks_visible_to(Actor.for_user(user))
            if isinstance(obj, Task)
            else requirements_visible_to(Actor.for_user(user))
        )
        if seen.filter(id=obj.id).exists():
            users.append(user)
    return users


def _quote(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= MENTION_QUOTE else flat[:MENTION_QUOTE].rstrip() + "…"


def _notify_mentioned_users(
    kind: str, obj: Task | Requirement, comment: TaskComment | RequirementComment, actor: Actor
) -> None:
    """One ``comment_mention`` notification per person the comment mentions: it links to
    the task or requirement, says who wrote and quotes the start of the comment."""
    key = "taskId" if kind == "task" else "requirementId"
    metadata = {
        key: obj.id,
        "commentId": comment.id,
        "authorId": actor.id,
        "authorName": actor.name,
        "authorRole": actor.kind,
    }
    if actor.is_agent:
        metadata["agentId"] = actor.id
    for user in _users_to_notify(comment.content, obj, actor):
        notify_user(
            user=user,
            type=NotificationType.COMMENT_MENTION,
            title=f'{actor.name} mentioned you on {kind} "{obj.title}"',
            body=_quote(comment.content),
            action_target={"path": f"/work?{kind}={obj.id}"},
            metadata=metadata,
        )


def _finished_by_assignee(task: Task, actor: Actor) -> bool:
    """Is a comment by ``actor`` one after the fact: a person's, on a task that has
    ended after its assignee worked on it?"""
    return (
        actor.is_user
        and task.assignee_id is not None
        and task.status in TERMINAL_TASK_STATES
        and task.execution_round > 0
    )


def _last_execution(task: Task) -> MailboxItem | None:
    """The assignee's execution item of the task's latest round (its session is the
    task's own), if any."""
    rows = MailboxItem.objects.filter(
        agent_id=task.assignee_id, source_type=MailboxType.TASK_STATUS_UPDATE, payload__taskId=task.id
    ).order_by("-queued_at", "-id")
    return next((item for item in rows[:50] if item.triggers_execution), None)


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


def _runs_in_loop(agent_id: str) -> bool:
    return Agent.objects.filter(id=agent_id, kind=Agent.Kind.INTERNAL).exists()


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
    session_reply_to: str | None = None,
) -> None:
    """Send the comment's mailbox items; ``session_reply_to``: the agent that gets it as a
    session reply (and nothing else). Then notify the people it mentions."""
    reply = (author_of(reply_to)[2], reply_to.content[:REPLY_SNIPPET]) if reply_to is not None else None
    # An agents-only thread past its streak: agents the loop runs hear no more of it.
    quiet = actor.agent_id is not None and streak > AGENT_STREAK_QUIET
    if quiet and session_reply_to is not None and _runs_in_loop(session_reply_to):
        session_reply_to = None
    if session_reply_to is not None and isinstance(obj, Task) and isinstance(comment, TaskComment):
        notices.send_session_reply(
            session_reply_to, task=obj, actor=actor, comment=comment, reply_to=reply, execution=_last_execution(obj)
        )
    skip = {actor.agent_id, session_reply_to}
    mentioned = [
        a
        for a in mentioned_agents(comment.content, candidates)
        if a.id not in skip and not (quiet and a.kind == Agent.Kind.INTERNAL)
    ]
    mentioned_ids = {a.id for a in mentioned}
    wanted = [r for r in dict.fromkeys(recipients) if r and r not in skip and r not in mentioned_ids]
    reached = Agent.objects.filter(id__in=wanted)
    existing = set((reached.exclude(kind=Agent.Kind.INTERNAL) if quiet else reached).values_list("id", flat=True))
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
    _notify_mentioned_users(kind, obj, comment, actor)


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
        session_reply_to=task.assignee_id if _finished_by_assignee(task, actor) else None,
    )
    history.comment_posted("task", task.id, comment.id)
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
    history.comment_posted("requirement", requirement.id, comment.id)
    return comment
