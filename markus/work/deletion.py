"""Deleting a task or a requirement (the console's delete; no other door deletes them).

What waits on the deleted thing is withdrawn in the same transaction, so nobody is
asked about something that is gone: the agents' queued and deferred mailbox items about
it (dropped with the reason, as any withdrawn item: ``mailbox.lifecycle.drop``), a
person's standing approval of a task (its filing, its review), and the tasks waiting on
a deleted task stop waiting on it (``dependencies.release_dependents``). Items being
processed finish: a task execution stops at its next yield point (``execution``)."""

from __future__ import annotations

from django.db import transaction

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.core.actors import Actor
from notifications.services import approval_cancel

from .dependencies import release_dependents
from .errors import WorkNotFound
from .filing import withdraw_filing_approval
from .models import Requirement, Task

# Items not yet taken up: what a withdrawal drops.
WITHDRAWN_STATUSES = (Status.QUEUED, Status.DEFERRED)


@transaction.atomic
def task_delete(*, task_id: str, actor: Actor) -> None:
    task = Task.objects.select_for_update().filter(id=task_id).first()
    if task is None:
        raise WorkNotFound(f"no task {task_id!r}")
    withdraw_filing_approval(task)
    review_approval = (task.metadata or {}).get("reviewApprovalId")
    if review_approval:
        approval_cancel(approval_id=review_approval)
    release_dependents(task, actor)
    _withdraw_items(f"task {task.id} was deleted by {actor.name}", taskId=task.id)
    task.delete()


@transaction.atomic
def requirement_delete(*, requirement_id: str, actor: Actor) -> None:
    """Its tasks stay, no longer part of a requirement."""
    requirement = Requirement.objects.select_for_update().filter(id=requirement_id).first()
    if requirement is None:
        raise WorkNotFound(f"no requirement {requirement_id!r}")
    _withdraw_items(f"requirement {requirement.id} was deleted by {actor.name}", requirementId=requirement.id)
    requirement.delete()


def _withdraw_items(reason: str, **about: str) -> int:
    """Drop every agent's items about the thing (``payload``'s ``taskId`` or
    ``requirementId``) not yet taken up. Returns how many were dropped."""
    lookup = {f"payload__{key}": value for key, value in about.items()}
    rows = MailboxItem.objects.filter(status__in=WITHDRAWN_STATUSES, **lookup).values_list("id", flat=True)
    return sum(lifecycle.drop(item_id, reason=reason, from_statuses=WITHDRAWN_STATUSES) for item_id in rows)
