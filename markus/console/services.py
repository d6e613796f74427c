"""Writes the operator makes from the console. Each is composed of the mailbox's own
services; the operator's name goes into the item (metadata or drop reason). Retry and
drop of one item are ``attention.operator``'s rules (shared with the mind view), here
under their console names."""

from __future__ import annotations

from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from attention.operator import OperatorError, RetryResult, drop_item, retry_item
from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.limits import CHAT_TEXT_MAX_CHARS

HEARTBEAT_SUMMARY = "Heartbeat check-in (requested by an operator)"
# The operator is the admin's ``request.user`` (staff, so never anonymous in practice).
Operator: TypeAlias = User | AnonymousUser
ConsoleError = OperatorError
console_retry_item = retry_item
console_drop_item = drop_item
__all__ = ["ConsoleError", "RetryResult", "console_drop_item", "console_retry_item"]


def _check_internal(agent: Agent) -> None:
    if agent.kind != Agent.Kind.INTERNAL:
        raise ConsoleError(f"{agent.id} is an external agent; its mailbox is not processed (use the bus)")


def console_send_message(*, agent: Agent, text: str, operator: Operator) -> MailboxItem:
    """A chat from the logged-in operator, as if typed in the agent's main session."""
    text = (text or "").strip()
    if not text:
        raise ConsoleError("the message is empty")
    if len(text) > CHAT_TEXT_MAX_CHARS:
        raise ConsoleError(f"the message is longer than {CHAT_TEXT_MAX_CHARS} characters")
    _check_internal(agent)
    return mailbox.mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:120], "content": text},
        metadata={**Actor.for_user(operator).sender_metadata(), "via": "admin"},
    )


def console_heartbeat(*, agent: Agent, operator: Operator) -> MailboxItem:
    """One heartbeat now, like the beat job's, for one agent."""
    _check_internal(agent)
    return mailbox.mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HEARTBEAT,
        payload={"summary": HEARTBEAT_SUMMARY, "content": HEARTBEAT_SUMMARY},
        metadata={
            "senderRole": "system",
            "requestedBy": operator.get_username(),
            "requestedAt": timezone.now().isoformat(),
        },
    )
