"""Writes about user notifications and approvals (seed sections 12 and 13.2).

``notify_user`` is the one way to create a notification: it stores the row and sends
a ``notification`` event to the user's group after commit. ``approval_respond`` answers
an approval and sends ``markus.core.signals.approval_answered`` inside the same
transaction, so whoever asked (the attention loop re-queuing a parked item, a human
task review) reacts atomically with the answer; a receiver that raises rolls it back.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from mailbox.models import MailboxItem
from markus.agents.models import Agent
from markus.core.errors import ConflictError, MarkusError
from markus.core.events import send_event_on_commit, user_group
from markus.core.signals import approval_answered

from .links import LINK_RULE, is_local_path
from .models import Approval, UserNotification
from .registry import PRIORITIES, USER_NOTIFICATION_TYPE_REGISTRY, NotificationType

ACTION_TYPES = ("navigate", "open_chat", "none")
DEFAULT_APPROVAL_OPTIONS = [{"id": "approve", "label": "Approve"}, {"id": "reject", "label": "Reject"}]


def serialize_notification(n: UserNotification) -> dict[str, Any]:
    return {
        "id": n.id,
        "type": n.type,
        "title": n.title,
        "body": n.body,
        "priority": n.priority,
        "read": n.read,
        "actionType": n.action_type,
        "actionTarget": n.action_target,
        "metadata": n.metadata or {},
        "createdAt": n.created_at,
    }


def serialize_approval(a: Approval) -> dict[str, Any]:
    return {
        "id": a.id,
        "title": a.title,
        "description": a.description,
        "options": a.options,
        "allowFreeform": a.allow_freeform,
        "status": a.status,
        "selectedOption": a.selected_option or None,
        "comment": a.comment,
        "agentId": a.agent_id,
        "mailboxItemId": a.mailbox_item_id,
        "createdAt": a.created_at,
        "answeredAt": a.answered_at,
    }


@transaction.atomic
def notify_user(
    *,
    user: User,
    type: str,
    title: str,
    body: str = "",
    priority: str | None = None,
    action_type: str | None = None,
    action_target: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> UserNotification:
    """Store a notification for ``user`` and push it to their sockets after commit.
    Priority and action type default to the registry's entry for ``type``; a target's
    ``path`` must be a path on this site (``is_local_path``), else 400."""
    try:
        descriptor = USER_NOTIFICATION_TYPE_REGISTRY[NotificationType(type)]
    except ValueError as exc:
        raise MarkusError(f"unknown notification type {type!r}") from exc
    priority = priority or descriptor.default_priority
    if priority not in PRIORITIES:
        raise MarkusError(f"priority must be one of {', '.join(PRIORITIES)}")
    action_type = action_type or descriptor.action
    if action_type not in ACTION_TYPES:
        raise MarkusError(f"action_type must be one of {', '.join(ACTION_TYPES)}")
    if action_target and "path" in action_target and not is_local_path(action_target["path"]):
        raise MarkusError(f"actionTarget.path must be {LINK_RULE}")
    notification = UserNotification.objects.create(
        user=user,
        type=type,
        title=title[:300],
        body=body or "",
        priority=priority,
        action_type=None if action_type == "none" else action_type,
        action_target=action_target,
        metadata=metadata or {},
    )
    send_event_on_commit(user_group(user.pk), "notification", {"notification": serialize_notification(notification)})
    return notification


def notification_mark_read(*, user: User, notification_id: str) -> UserNotification:
    notification = UserNotification.objects.filter(user=user, id=notification_id).first()
    if notification is None:
        raise Http404("No such notification.")
    if not notification.read:
        UserNotification.objects.filter(id=notification.id).update(read=True)
        notification.read = True
    return notification


def notifications_mark_all_read(*, user: User) -> int:
    return UserNotification.objects.filter(user=user, read=False).update(read=True)


# An approval's choices: at most this many, each of its texts at most this long.
MAX_OPTIONS = 10
MAX_OPTION_CHARS = 200


def approval_options(options: Any) -> list[dict[str, Any]]:
    """An approval's choices as they are stored: objects ``{id, label, description?}``,
    or plain labels, as a model writes them (``["Approve", "Reject it"]``): a label's
    option has it as its label and, as its id, the label in lower case with its words
    joined by ``_`` (``reject_it``). None: approve or reject. Ids are unique; at most
    ``MAX_OPTIONS``, each text at most ``MAX_OPTION_CHARS``."""
    if options is None:
        return [dict(o) for o in DEFAULT_APPROVAL_OPTIONS]
    if not isinstance(options, list) or not options:
        raise MarkusError("options must be a non-empty list of {id, label, description?} or of labels")
    if len(options) > MAX_OPTIONS:
        raise MarkusError(f"an approval may offer at most {MAX_OPTIONS} options, not {len(options)}")
    choices: list[dict[str, Any]] = []
    for option in options:
        if isinstance(option, str) and option.strip():
            option = {"id": _option_id(option, len(choices)), "label": option.strip()}
        if not isinstance(option, dict) or not isinstance(option.get("id"), str) or not option["id"]:
            raise MarkusError("every option needs a string id (or is a label)")
        for name in ("label", "description", "id"):
            if len(str(option.get(name, ""))) > MAX_OPTION_CHARS:
                raise MarkusError(f"an option's {name} may have at most {MAX_OPTION_CHARS} characters")
        if any(c["id"] == option["id"] for c in choices):
            raise MarkusError(f"duplicate option id {option['id']!r}")
        choices.append(option)
    return choices


def _option_id(label: str, index: int) -> str:
    return re.sub(r"\W+", "_", label.strip().lower()).strip("_") or f"option_{index + 1}"


@transaction.atomic
def approval_create(
    *,
    user: User,
    title: str,
    description: str = "",
    options: list[dict[str, Any]] | None = None,
    allow_freeform: bool = False,
    agent: Agent | None = None,
    mailbox_item: MailboxItem | None = None,
    notification_type: str = NotificationType.APPROVAL_REQUEST,
    priority: str | None = None,
    action_target: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Approval:
    """Ask ``user`` for a decision: an Approval row plus a notification (by default an
    ``approval_request``; a human task review uses ``task_review``). The notification's
    metadata carries ``approvalId``."""
    approval = Approval.objects.create(
        user=user,
        agent=agent,
        mailbox_item=mailbox_item,
        title=title[:300],
        description=description or "",
        options=approval_options(options),
        allow_freeform=allow_freeform,
    )
    notify_user(
        user=user,
        type=notification_type,
        title=title,
        body=description,
        priority=priority,
        action_target=action_target,
        metadata={**(metadata or {}), "approvalId": approval.id, "agentId": approval.agent_id},
    )
    return approval


@transaction.atomic
def approval_respond(*, user: User, approval_id: str, selected_option: str, comment: str = "") -> Approval:
    """Answer a pending approval of ``user``.

    1. Lock the row; a foreign or missing approval is a 404, an answered one a 409.
    2. The option must be one offered, unless free-form answers are allowed.
    3. Store the answer, mark its notifications read, then run the hooks.
    """
    approval = Approval.objects.select_for_update().filter(user=user, id=approval_id).first()
    if approval is None:
        raise Http404("No such approval.")
    if approval.status != Approval.State.PENDING:
        raise ConflictError(f"approval {approval.id} is already {approval.status}")
    if not isinstance(selected_option, str) or not selected_option.strip():
        raise MarkusError("selectedOption is required")
    if not isinstance(comment, str):
        raise MarkusError("comment must be a string")
    offered = [o.get("id") for o in approval.options or [] if isinstance(o, dict)]
    if selected_option not in offered and not approval.allow_freeform:
        raise MarkusError(f"selectedOption must be one of: {', '.join(map(str, offered))}")
    approval.status = Approval.State.ANSWERED
    approval.selected_option = selected_option[:200]
    approval.comment = comment
    approval.answered_at = timezone.now()
    approval.save(update_fields=["status", "selected_option", "comment", "answered_at"])
    UserNotification.objects.filter(user=user, metadata__approvalId=approval.id).update(read=True)
    approval_answered.send(sender=Approval, approval=approval)
    return approval


# The options that grant what an approval asks (the default options' "approve").
GRANTING_OPTIONS = ("approve", "approved", "yes")


def approval_granted(approval: Approval) -> bool:
    """Whether a person answered the approval with an option that grants it."""
    return approval.status == Approval.State.ANSWERED and approval.selected_option in GRANTING_OPTIONS


def approval_cancel(*, approval_id: str) -> bool:
    """Withdraw a pending approval (its question no longer stands). True if it was."""
    with transaction.atomic():
        changed = Approval.objects.filter(id=approval_id, status=Approval.State.PENDING).update(
            status=Approval.State.CANCELLED, answered_at=timezone.now()
        )
        if changed:
            UserNotification.objects.filter(metadata__approvalId=approval_id).update(read=True)
    return changed == 1
