"""Reads of tasks, requirements and their comments, always through what an actor may
see. An object the actor may not see is reported exactly like a missing one."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from markus.agents.auth import agents_seen_by
from markus.agents.models import Agent
from markus.core.actors import Actor

from .models import CommentBase, Requirement, RequirementComment, Task, TaskComment, TaskState
from .states import dependency_satisfied

REPLY_SNIPPET = 200
# A dependent in one of these states waits on its dependencies (a cascade cancels it).
WAITING_STATES = (TaskState.PENDING, TaskState.BLOCKED)


# ---------------------------------------------------------------------------- visibility


def agents_visible_to(actor: Actor) -> QuerySet[Agent]:
    """``markus.agents.auth.visible_agents`` for an Actor instead of a request."""
    if actor.kind == "system":
        return Agent.objects.all()
    if actor.is_agent:
        return Agent.objects.filter(id=actor.id)
    return agents_seen_by(actor.user_id, is_staff=actor.is_staff)


def agents_assignable_by(actor: Actor) -> QuerySet[Agent]:
    """Agents the actor may name as assignee, reviewer or watcher: a user the agents
    they see; an agent itself and its teammates."""
    if actor.is_agent:
        agent = Agent.objects.filter(id=actor.id).first()
        if agent is None or agent.team_id is None:
            return Agent.objects.filter(id=actor.id)
        return Agent.objects.filter(Q(id=actor.id) | Q(team_id=agent.team_id))
    return agents_visible_to(actor)


def tasks_visible_to(actor: Actor) -> QuerySet[Task]:
    if actor.kind == "system" or (actor.is_user and actor.is_staff):
        return Task.objects.all()
    if actor.is_agent:
        a = actor.id
        return Task.objects.filter(Q(assignee_id=a) | Q(reviewer_agent_id=a) | Q(created_by_agent_id=a))
    agents = agents_visible_to(actor).values("id")
    uid = actor.user_id
    return Task.objects.filter(
        Q(created_by_user_id=uid)
        | Q(reviewer_user_id=uid)
        | Q(assignee_id__in=agents)
        | Q(reviewer_agent_id__in=agents)
        | Q(created_by_agent_id__in=agents)
    )


def requirements_visible_to(actor: Actor) -> QuerySet[Requirement]:
    if actor.kind == "system" or (actor.is_user and actor.is_staff):
        return Requirement.objects.all()
    if actor.is_agent:
        a = actor.id
        ids = Task.objects.filter(assignee_id=a, requirement__isnull=False).values("requirement_id")
        return Requirement.objects.filter(Q(created_by_agent_id=a) | Q(metadata__agentId=a) | Q(id__in=ids))
    agent_ids = list(agents_visible_to(actor).values_list("id", flat=True))
    return Requirement.objects.filter(
        Q(created_by_user_id=actor.user_id) | Q(created_by_agent_id__in=agent_ids) | Q(metadata__agentId__in=agent_ids)
    )


def with_dependencies(rows: QuerySet[Task]) -> QuerySet[Task]:
    """Rows whose ``dependsOn`` costs one query for the whole page (only the ids), and
    whose ``dependents`` count comes with the rows."""
    waiting = Count("dependents", filter=Q(dependents__status__in=WAITING_STATES), distinct=True)
    return rows.prefetch_related(Prefetch("depends_on", queryset=Task.objects.only("id"))).annotate(
        waiting_dependents=waiting
    )


def waiting_dependents_count(task: Task) -> int:
    """How many tasks wait on ``task`` directly (pending or blocked, depending on it)."""
    annotated = getattr(task, "waiting_dependents", None)
    if isinstance(annotated, int):
        return annotated
    return Task.objects.filter(depends_on=task, status__in=WAITING_STATES).count()


def waiting_dependents(task_id: str) -> list[str]:
    """Every task a cascade cancellation of ``task_id`` cancels: those waiting on it,
    and those waiting on them (pending or blocked), sorted by id."""
    found: set[str] = set()
    frontier = [task_id]
    while frontier:
        rows = Task.objects.filter(depends_on__in=frontier, status__in=WAITING_STATES).values_list("id", flat=True)
        frontier = [r for r in set(rows) if r not in found and r != task_id]
        found.update(frontier)
    return sorted(found)


def access_task(actor: Actor, task_id: str) -> Task:
    rows = tasks_visible_to(actor).select_related("assignee", "reviewer_agent", "reviewer_user")
    task = rows.filter(id=task_id).first()
    if task is None:
        raise Http404("No such task.")
    return task


def access_requirement(actor: Actor, requirement_id: str) -> Requirement:
    requirement = requirements_visible_to(actor).filter(id=requirement_id).first()
    if requirement is None:
        raise Http404("No such requirement.")
    return requirement


# ---------------------------------------------------------------------------- rules read by services


def unmet_dependencies(task: Task) -> list[str]:
    return [
        d["id"]
        for d in task.depends_on.values("id", "status", "completed_at")
        if not dependency_satisfied(d["status"], d["completed_at"])
    ]


def dependency_cycle(task_id: str, depends_on: list[str]) -> list[str]:
    """The cycle ``task_id`` would close by depending on ``depends_on``, as the ids
    round it (``[a, b, a]``), or [] if none: tasks waiting on each other wait for good.
    A breadth-first walk down the dependencies, one query a level."""
    if task_id in depends_on:
        return [task_id, task_id]
    Edge = Task.depends_on.through
    came_from = dict.fromkeys(depends_on, task_id)  # each reached task: the one that depends on it
    frontier = list(came_from)
    while frontier:
        edges = Edge.objects.filter(from_task_id__in=frontier).values_list("from_task_id", "to_task_id")
        frontier = []
        for waiter, dependency in edges:
            if dependency == task_id:
                path = [waiter]
                while path[-1] != task_id:
                    path.append(came_from[path[-1]])
                return [*reversed(path), task_id]
            if dependency not in came_from:
                came_from[dependency] = waiter
                frontier.append(dependency)
    return []


def requirement_agent_id(requirement: Requirement) -> str | None:
    """The agent in charge: the proposing agent, or the one a human named."""
    if requirement.created_by_agent_id:
        return requirement.created_by_agent_id
    agent_id = (requirement.metadata or {}).get("agentId")
    return agent_id if isinstance(agent_id, str) and agent_id else None


# An agent streak is counted up to this many comments: a thread's length costs no more.
STREAK_READ = 50
# Past this many agent comments in a row on a thread, agents the loop runs are no longer
# sent its agents' comments (``comment_services._deliver``): two agents answering each
# other would spend without end. A person's comment wakes the thread.
AGENT_STREAK_QUIET = 10


def agent_streak(comments: QuerySet[TaskComment] | QuerySet[RequirementComment]) -> int:
    """Consecutive agent-written comments at the end of a thread (section 3.5), at most
    ``STREAK_READ``."""
    streak = 0
    newest = comments.order_by("-created_at", "-id").values_list("author_agent_id", flat=True)
    for author_agent_id in newest[:STREAK_READ]:
        if author_agent_id is None:
            break
        streak += 1
    return streak


def quiet_note(comment: TaskComment | RequirementComment) -> dict[str, str]:
    """An agent's comment on a thread gone quiet (``AGENT_STREAK_QUIET``): the note its
    author is answered with, that agents Markus runs were not sent it ({} otherwise)."""
    if comment.author_agent_id is None:
        return {}
    thread = (
        TaskComment.objects.filter(task_id=comment.task_id)
        if isinstance(comment, TaskComment)
        else RequirementComment.objects.filter(requirement_id=comment.requirement_id)
    )
    if agent_streak(thread) <= AGENT_STREAK_QUIET:
        return {}
    return {
        "note": f"Agents Markus runs were not sent this comment: more than {AGENT_STREAK_QUIET} comments in a row "
        "here are agents'. Stop here unless a person asks; a person's comment wakes the thread."
    }


# ---------------------------------------------------------------------------- output shapes


def task_data(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "title": task.title,
        "description": task.description,
        "deliverables": task.deliverables,
        "status": task.status,
        "assigneeId": task.assignee_id,
        "reviewerId": task.reviewer_agent_id,
        "reviewerUserId": task.reviewer_user_id,
        "createdByAgentId": task.created_by_agent_id,
        "createdByUserId": task.created_by_user_id,
        "requirementId": task.requirement_id,
        "teamId": task.team_id,
        # ``all()``, not ``values_list``: a list page prefetches the dependencies.
        "dependsOn": sorted(d.id for d in task.depends_on.all()),
        "dependents": waiting_dependents_count(task),
        "awaitingApproval": task.filing_approval_id is not None,
        "blockedReason": task.blocked_reason or None,
        "metadata": task.metadata or {},
        "executionRound": task.execution_round,
        "cancelRequestedAt": task.cancel_requested_at,
        "completedAt": task.completed_at,
        "createdAt": task.created_at,
        "updatedAt": task.updated_at,
    }


def requirement_data(requirement: Requirement) -> dict[str, Any]:
    return {
        "id": requirement.id,
        "title": requirement.title,
        "description": requirement.description,
        "status": requirement.status,
        "createdByAgentId": requirement.created_by_agent_id,
        "createdByUserId": requirement.created_by_user_id,
        "agentId": requirement_agent_id(requirement),
        "teamId": requirement.team_id,
        "taskIds": sorted(requirement.tasks.values_list("id", flat=True)),
        "rejectedReason": requirement.rejected_reason or None,
        "metadata": requirement.metadata or {},
        "createdAt": requirement.created_at,
        "updatedAt": requirement.updated_at,
    }


def author_of(comment: CommentBase) -> tuple[str, str | None, str]:
    """(kind, id, display name) of a comment's author."""
    if comment.author_agent_id:
        agent = comment.author_agent
        return "agent", comment.author_agent_id, agent.name if agent else comment.author_agent_id
    if comment.author_user_id:
        user = comment.author_user
        return "user", str(comment.author_user_id), user.get_username() if user else str(comment.author_user_id)
    return "system", None, "system"


def comment_data(comment: TaskComment | RequirementComment) -> dict[str, Any]:
    kind, author_id, name = author_of(comment)
    parent = comment.reply_to
    data: dict[str, Any] = {
        "id": comment.id,
        "authorKind": kind,
        "authorId": author_id,
        "authorName": name,
        "content": comment.content,
        "replyToCommentId": comment.reply_to_id,
        "replyToAuthor": author_of(parent)[2] if parent else None,
        "replyToContent": parent.content[:REPLY_SNIPPET] if parent else None,
        "activityId": comment.activity_id,
        # The execution log behind an agent's comment (section 15).
        "activityLogUrl": (
            f"/api/agents/{author_id}/activity-logs?activityId={comment.activity_id}"
            if kind == "agent" and comment.activity_id
            else None
        ),
        "createdAt": comment.created_at,
    }
    if isinstance(comment, TaskComment):
        data["taskId"] = comment.task_id
    else:
        data["requirementId"] = comment.requirement_id
    return data


_COMMENT_RELATED = ("author_agent", "author_user", "reply_to__author_agent", "reply_to__author_user")


def task_comments(task: Task) -> list[dict[str, Any]]:
    rows = TaskComment.objects.filter(task=task).select_related(*_COMMENT_RELATED).order_by("created_at", "id")
    return [comment_data(c) for c in rows]


def requirement_comments(requirement: Requirement) -> list[dict[str, Any]]:
    rows = RequirementComment.objects.filter(requirement=requirement).select_related(*_COMMENT_RELATED)
    return [comment_data(c) for c in rows.order_by("created_at", "id")]


def task_reviewer(task: Task) -> tuple[str, str | int] | None:
    """Who reviews the task: ``("agent", agent_id)`` or ``("user", user_id)``.

    The named reviewer (agent, else user); failing that the human who created the
    task; failing that the agent who created it, unless it is the assignee."""
    if task.reviewer_agent_id:
        return "agent", task.reviewer_agent_id
    if task.reviewer_user_id:
        return "user", task.reviewer_user_id
    if task.created_by_user_id:
        return "user", task.created_by_user_id
    if task.created_by_agent_id and task.created_by_agent_id != task.assignee_id:
        return "agent", task.created_by_agent_id
    return None


def actor_is_reviewer(task: Task, actor: Actor) -> bool:
    reviewer = task_reviewer(task)
    if reviewer is None:
        return False
    kind, rid = reviewer
    return actor.kind == kind and str(rid) == actor.id
