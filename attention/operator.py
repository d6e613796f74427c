"""What an operator may do to one mailbox item, from the console or the mind view: the
same rules, in one place. The operator's name goes into the item (metadata or drop reason).

Retry (``retry_item``), decided per status:
- ``completed`` / ``dropped``: a fresh queued copy (new id, ``metadata.retryOf`` =
  the original). The original stays as it was, with its decisions and activity, as
  history. The copy goes through ``mailbox_enqueue``, so the dedup rules apply: it may
  be merged into a queued item of its group, and the result says so.
- ``deferred``: resurfaced now, in place (same id, so a preempted item resumes its
  persisted LLM session). An item parked for an approval is refused: answer the
  approval instead.
- ``merged``: refused, naming the survivor; a merged item is never resurrected.
- ``queued`` / ``processing``: refused, it is already in hand.

Drop (``drop_item``): queued or deferred items, any type (an operator may drop a human's
chat; the protection of ``mailbox.merge.is_protected`` is for agent tools), with a reason. A
processing item is refused: pause the agent first, which puts it back in the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.core.errors import MarkusError

from .services import wake_on_commit

# The operator is the admin's ``request.user`` (staff, so never anonymous in practice).
Operator: TypeAlias = User | AnonymousUser


class OperatorError(MarkusError):
    """An operator action that does not apply; the message is shown as is."""


@dataclass(frozen=True)
class RetryResult:
    item: MailboxItem  # the copy, or the resurfaced original
    mode: str  # "copied" | "merged" | "resurfaced"


def retry_item(*, item_id: str, operator: Operator) -> RetryResult:
    item = MailboxItem.objects.filter(id=item_id).first()
    if item is None:
        raise OperatorError(f"no mailbox item {item_id}")
    if item.status == Status.MERGED:
        raise OperatorError(f"{item.id} was merged into {item.merged_into_id}; retry that item instead")
    if item.status in (Status.QUEUED, Status.PROCESSING):
        raise OperatorError(f"{item.id} is {item.status}; nothing to retry")
    if item.status == Status.DEFERRED:
        return RetryResult(_resurface(item), "resurfaced")
    # The caller's metadata comes along; the system's marks of the original's runs (its
    # retries, crashes, batch, approval) do not, but for the bus stream it answers to.
    stream = item.marks.get("streamId")
    copy = mailbox_enqueue(
        agent_id=item.agent_id,
        source_type=item.source_type,
        payload=dict(item.payload or {}),
        priority=item.priority,
        metadata={**(item.metadata or {}), "retryOf": item.id, "retriedBy": operator.get_username()},
        marks={"streamId": stream} if stream else None,
    )
    return RetryResult(copy, "merged" if copy.status == Status.MERGED else "copied")


def _resurface(item: MailboxItem) -> MailboxItem:
    """Deferred → queued now, unless parked for an approval."""
    if item.marks.get("waitingForApproval") is True:
        raise OperatorError(f"{item.id} waits for approval {item.marks.get('approvalId')}; answer it")
    with transaction.atomic():
        if not lifecycle.resurface_now(item.id):
            raise OperatorError(f"{item.id} changed meanwhile; reload and try again")
        item.refresh_from_db()
        wake_on_commit(item.agent_id)
    return item


def drop_item(*, item_id: str, reason: str, operator: Operator) -> MailboxItem:
    reason = (reason or "").strip()
    if not reason:
        raise OperatorError("a reason is required")
    item = MailboxItem.objects.filter(id=item_id).first()
    if item is None:
        raise OperatorError(f"no mailbox item {item_id}")
    if item.status == Status.PROCESSING:
        raise OperatorError(f"{item.id} is being processed; pause the agent first (it goes back to the queue)")
    if item.status not in (Status.QUEUED, Status.DEFERRED):
        raise OperatorError(f"{item.id} is {item.status}; only queued or deferred items can be dropped")
    full = f"operator {operator.get_username()}: {reason}"
    if not lifecycle.drop(item.id, reason=full, from_statuses=[Status.QUEUED, Status.DEFERRED]):
        raise OperatorError(f"{item.id} changed meanwhile; reload and try again")
    item.refresh_from_db()
    return item
