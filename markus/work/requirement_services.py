"""Writes about requirements: propose / create, the one transition function and its
named steps (approve, reject, resubmit, complete, cancel), and the "all tasks done"
check the task cascade calls.

An agent's proposal starts ``pending`` (at most three pending per agent) and needs a
human's approval; a human's requirement starts ``in_progress``, optionally with an
agent in charge (``metadata.agentId``) who is told to create its tasks. Only humans
approve or reject; only the agent in charge (or a human) resubmits, completes or
cancels.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.signals import requirement_status_changed
from notifications.registry import NotificationType
from notifications.services import notify_user

from . import notices
from .errors import IllegalTransition, WorkError, WorkNotFound, WorkPermissionError
from .inputs import clean_text
from .models import Requirement, RequirementState, Task
from .selectors import requirement_agent_id
from .states import (
    MAX_PENDING_REQUIREMENTS_PER_AGENT,
    TERMINAL_TASK_STATES,
    requirement_transition_allowed,
)

R = RequirementState


class RequirementStep(Protocol):
    """A named step: ``requirement_approve``, ``_reject``, ``_complete`` or ``_cancel``."""

    def __call__(self, *, requirement_id: str, actor: Actor, reason: str = "") -> Requirement: ...


def _path(requirement: Requirement) -> dict[str, str]:
    return {"path": f"/work?requirement={requirement.id}"}


def _owner_user(requirement: Requirement) -> User | None:
    """The human who answers for a requirement: its creator, else the agent's owner,
    else the owner of the agent's team."""
    if requirement.created_by_user_id:
        return requirement.created_by_user
    agent = Agent.objects.select_related("owner", "team__owner").filter(id=requirement_agent_id(requirement)).first()
    if agent is None:
        return None
    return agent.answerable_person


def _check_pending_quota(agent_id: str, *, exclude: str | None = None) -> None:
    pending = Requirement.objects.filter(created_by_agent_id=agent_id, status=R.PENDING)
    if exclude:
        pending = pending.exclude(id=exclude)
    if pending.count() >= MAX_PENDING_REQUIREMENTS_PER_AGENT:
        raise WorkError(
            f"you already have {MAX_PENDING_REQUIREMENTS_PER_AGENT} pending requirements; "
            "wait for a decision on them (or cancel one) before proposing another"
        )


@transaction.atomic
def requirement_create(
    *,
    actor: Actor,
    title: str,
    description: str = "",
    agent_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Requirement:
    """An agent's proposal (``pending``, the owner is notified) or a human's
    requirement (``in_progress``; ``agent_id`` names the agent in charge, who is asked
    to create its tasks). The caller checks which agents the actor may name."""
    title = clean_text(title, "title", max_length=300, required=True)
    description = clean_text(description, "description", max_length=100_000)
    if metadata is not None and not isinstance(metadata, dict):
        raise WorkError("metadata must be an object")
    metadata = dict(metadata or {})
    metadata.pop("agentId", None)
    if actor.is_agent:
        agent = Agent.objects.filter(id=actor.id).first()
        if agent is None:
            raise WorkError(f"no such agent {actor.id!r}")
        _check_pending_quota(agent.id)
        requirement = Requirement.objects.create(
            title=title,
            description=description,
            status=R.PENDING,
            created_by_agent=agent,
            team_id=agent.team_id,
            metadata=metadata,
        )
        _filed(requirement, actor)
        owner = _owner_user(requirement)
        if owner is not None:
            notify_user(
                user=owner,
                type=NotificationType.REQUIREMENT_CREATED,
                title=f"{agent.name} proposes: {title}",
                body=description[:2000],
                action_target=_path(requirement),
                metadata={"requirementId": requirement.id, "agentId": agent.id},
            )
        return requirement
    agent = None
    if agent_id not in (None, ""):
        agent = Agent.objects.filter(id=agent_id).first() if isinstance(agent_id, str) else None
        if agent is None:
            raise WorkError(f"agentId: no such agent {agent_id!r}")
        metadata["agentId"] = agent.id
    requirement = Requirement.objects.create(
        title=title,
        description=description,
        status=R.IN_PROGRESS,
        created_by_user_id=actor.user_id,
        team_id=agent.team_id if agent else None,
        metadata=metadata,
    )
    _filed(requirement, actor)
    if agent is not None:
        notices.send_requirement_update(
            agent.id,
            requirement,
            actor=actor,
            from_status=None,
            action_required=True,
            priority=1,
            content=(
                f'{actor.name} created requirement "{title}" ({requirement.id}) and put you in charge.\n'
                f'Create the tasks that fulfil it (task_create with requirement_id="{requirement.id}").\n\n'
                f"{description}"
            ).strip(),
        )
    return requirement


def _filed(requirement: Requirement, actor: Actor) -> None:
    """Filing is the first event of a requirement's life (from nothing to its status)."""
    requirement_status_changed.send(
        sender=Requirement,
        requirement=requirement,
        from_status=None,
        to_status=requirement.status,
        actor=actor,
        note="",
    )


def _lock(requirement_id: str) -> Requirement:
    requirement = Requirement.objects.select_for_update().filter(id=requirement_id).first()
    if requirement is None:
        raise WorkNotFound(f"no requirement {requirement_id!r}")
    return requirement


def _check_permission(requirement: Requirement, to_status: str, actor: Actor) -> None:
    if not actor.is_agent:
        return
    if requirement.status == R.PENDING and to_status in (R.IN_PROGRESS, R.REJECTED):
        raise WorkPermissionError("only a human can approve or reject a requirement")
    if actor.id != requirement_agent_id(requirement):
        raise WorkPermissionError(
            f"only the agent in charge of requirement {requirement.id} (or a human) can change it"
        )


@transaction.atomic
def requirement_transition(*, requirement_id: str, to_status: str, actor: Actor, reason: str = "") -> Requirement:
    """Move a requirement to ``to_status``; IllegalTransition (409) if the state
    machine forbids it, WorkPermissionError (403) if the actor may not. A move to the
    status it already has is a no-op (nothing recorded, nobody told), as upstream.
    Rejecting keeps the reason (``rejected_reason``); going back to pending clears it."""
    if to_status not in R.values:
        raise WorkError(f"unknown status {to_status!r}; expected one of: {', '.join(R.values)}")
    reason = clean_text(reason, "reason", max_length=10_000)
    requirement = _lock(requirement_id)
    from_status = requirement.status
    if to_status == from_status:
        _check_permission(requirement, to_status, actor)
        return requirement
    if not requirement_transition_allowed(from_status, to_status):
        allowed = [s for s in R.values if requirement_transition_allowed(from_status, s)]
        raise IllegalTransition(
            f"requirement {requirement.id} cannot move from {from_status} to {to_status}"
            f" (allowed: {', '.join(allowed) or 'none, it is final'})",
            allowed=allowed,
        )
    _check_permission(requirement, to_status, actor)
    if to_status == R.PENDING and requirement.created_by_agent_id:
        _check_pending_quota(requirement.created_by_agent_id, exclude=requirement.id)
    requirement.status = to_status
    requirement.updated_at = timezone.now()
    if to_status == R.REJECTED:
        requirement.rejected_reason = reason
    elif to_status == R.PENDING:
        requirement.rejected_reason = ""
    requirement.save(update_fields=["status", "updated_at", "rejected_reason"])
    _side_effects(requirement, actor, from_status, reason)
    requirement_status_changed.send(
        sender=Requirement,
        requirement=requirement,
        from_status=from_status,
        to_status=to_status,
        actor=actor,
        note=reason,
    )
    return requirement


def _side_effects(requirement: Requirement, actor: Actor, from_status: str, reason: str) -> None:
    agent_id = requirement_agent_id(requirement)
    to_status = requirement.status
    because = f"\nReason: {reason}" if reason else ""
    head = f'Requirement "{requirement.title}" ({requirement.id})'
    if agent_id and agent_id != actor.agent_id:
        if from_status == R.PENDING and to_status == R.IN_PROGRESS:
            content = (
                f"{head} was approved by {actor.name}.{because}\nCreate the tasks that fulfil it "
                f'(task_create with requirement_id="{requirement.id}").'
            )
            notices.send_requirement_update(
                agent_id,
                requirement,
                actor=actor,
                from_status=from_status,
                content=content,
                action_required=True,
                priority=1,
            )
        elif to_status == R.REJECTED:
            content = (
                f"{head} was rejected by {actor.name}.{because}\nDecide whether to resubmit it with "
                "changes (requirement_resubmit) or to abandon it."
            )
            notices.send_requirement_update(
                agent_id,
                requirement,
                actor=actor,
                from_status=from_status,
                content=content,
                action_required=True,
                priority=1,
            )
        else:
            content = f"{head} moved from {from_status} to {to_status} (by {actor.name}).{because}\nInformational."
            notices.send_requirement_update(
                agent_id, requirement, actor=actor, from_status=from_status, content=content
            )
    owner = _owner_user(requirement)
    if owner is None or (actor.is_user and actor.id == str(owner.pk)):
        return
    if to_status == R.PENDING:
        notify_user(
            user=owner,
            type=NotificationType.REQUIREMENT_CREATED,
            title=f"Requirement resubmitted: {requirement.title}",
            body=requirement.description[:2000],
            action_target=_path(requirement),
            metadata={"requirementId": requirement.id, "agentId": agent_id},
        )
    elif to_status in (R.COMPLETED, R.CANCELLED):
        notify_user(
            user=owner,
            type=NotificationType.REQUIREMENT_DECISION,
            title=f"Requirement {to_status}: {requirement.title}",
            body=f"By {actor.name}.{because}".strip(),
            action_target=_path(requirement),
            metadata={"requirementId": requirement.id, "agentId": agent_id},
        )


def requirement_approve(*, requirement_id: str, actor: Actor, reason: str = "") -> Requirement:
    return requirement_transition(requirement_id=requirement_id, to_status=R.IN_PROGRESS, actor=actor, reason=reason)


def requirement_reject(*, requirement_id: str, actor: Actor, reason: str = "") -> Requirement:
    return requirement_transition(requirement_id=requirement_id, to_status=R.REJECTED, actor=actor, reason=reason)


def requirement_complete(*, requirement_id: str, actor: Actor, reason: str = "") -> Requirement:
    return requirement_transition(requirement_id=requirement_id, to_status=R.COMPLETED, actor=actor, reason=reason)


def requirement_cancel(*, requirement_id: str, actor: Actor, reason: str = "") -> Requirement:
    return requirement_transition(requirement_id=requirement_id, to_status=R.CANCELLED, actor=actor, reason=reason)


@transaction.atomic
def requirement_resubmit(
    *,
    requirement_id: str,
    actor: Actor,
    title: str | None = None,
    description: str | None = None,
) -> Requirement:
    """rejected → pending, optionally with a new title and description."""
    requirement = _lock(requirement_id)
    if requirement.status != R.REJECTED:
        raise IllegalTransition(
            f"requirement {requirement.id} is {requirement.status}; only a rejected one can be resubmitted"
        )
    _check_permission(requirement, R.PENDING, actor)
    if title is not None:
        requirement.title = clean_text(title, "title", max_length=300, required=True)
    if description is not None:
        requirement.description = clean_text(description, "description", max_length=100_000)
    requirement.save(update_fields=["title", "description"])
    return requirement_transition(requirement_id=requirement.id, to_status=R.PENDING, actor=actor)


@transaction.atomic
def requirement_tasks_settled(*, requirement_id: str) -> bool:
    """Called when a linked task reaches a terminal state: if the requirement is in
    progress and all its tasks are terminal, ask the agent in charge to review the
    results (priority 2, ``actionRequired``) or, without one, tell its human. True if
    anyone was asked."""
    requirement = Requirement.objects.select_for_update().filter(id=requirement_id).first()
    if requirement is None or requirement.status != R.IN_PROGRESS:
        return False
    statuses = list(Task.objects.filter(requirement=requirement).values_list("status", flat=True))
    if not statuses or any(s not in TERMINAL_TASK_STATES for s in statuses):
        return False
    summary = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    content = (
        f'All tasks of requirement "{requirement.title}" ({requirement.id}) are done ({summary}).\n'
        "Review the results: mark the requirement completed if it is fulfilled, or create more tasks."
    )
    agent_id = requirement_agent_id(requirement)
    system = Actor.system()
    if agent_id:
        notices.send_requirement_update(
            agent_id,
            requirement,
            actor=system,
            from_status=requirement.status,
            content=content,
            action_required=True,
            priority=2,
            summary=f"Review needed: {requirement.title}",
        )
        return True
    owner = _owner_user(requirement)
    if owner is None:
        return False
    notify_user(
        user=owner,
        type=NotificationType.REQUIREMENT_DECISION,
        title=f"Review needed: {requirement.title}",
        body=content,
        action_target=_path(requirement),
        metadata={"requirementId": requirement.id},
    )
    return True
