"""The one way up: every signal a lower app sends for an upper one to hear.

A lower app never imports an upper one; when something it does matters above it, it
sends one of these Django signals, and the upper app connects its receiver in its
``AppConfig.ready`` (with ``on`` for a plain function). This module is the whole set,
with who sends each and what it carries; Django's own model signals (``post_save``,
``post_delete``, ``post_migrate``) are the only others the apps use. The set lives in
the kernel so that a sender and its listeners share it without either importing the other.

Unless said otherwise a signal is sent inside the sender's transaction, and a receiver
that raises rolls the sender's write back with it (``Signal.send``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.dispatch import Signal

# The mailbox (``mailbox.services.emit_item``): an item's row is written; the loop wakes
# its agent on commit, an outside agent's item goes to its bus inbox. kwargs: item.
# Receivers are cached per sender (one send per enqueue, on the hot path).
item_enqueued = Signal(use_caching=True)

# The work app: a task's or a requirement's status changed (its history, the bus's
# lifecycle topic). kwargs: task | requirement, from_status, to_status, actor, note.
task_status_changed = Signal()
requirement_status_changed = Signal()

# Notifications (``notifications.services.approval_respond``): a person answered an
# approval; whoever asked it (the loop's parked item, a task's review, a filing) reacts in
# the answer's transaction and ignores approvals that are not its own. kwargs: approval.
approval_answered = Signal()

# The bus: a reply stream (one with ``reply_to``) closed; the loop resumes the item that
# waits for it. kwargs: stream.
reply_closed = Signal()
# The bus: an agent wrote on its answer to a person's chat (``HUB_CHAT_PREFIX``); it is the
# chat's reply. kwargs: stream, chunk.
hub_answered = Signal()

# The loop's toolbox (``attention.toolbox.tools_for``) asks what else an item is offered
# besides the built-in tools (the attached MCP tool servers): each receiver answers a list
# of ``attention.toolbox.Tool``. Outside a transaction. kwargs: agent_id, scenario.
tools_wanted = Signal()

# The sweep (``attention.services.sweep``, every 15 s) has kicked the agents with work; the
# backstops run (dead workers tidied, sleepers woken, timed-out waits resumed, the bus
# outbox relayed). Sent with ``send_robust``: one receiver's failure is logged, the others
# run. No kwargs.
swept = Signal()


def on(signal: Signal, hook: Callable[..., Any], uid: str) -> None:
    """Connect a plain function to ``signal``: it is called with the signal's kwargs by
    name (no ``sender``, no ``signal``), and what it returns is the receiver's answer.
    Held strongly (the adapter has no other owner); ``uid`` makes a second connect a no-op."""

    def receiver(sender: Any, signal: Signal | None = None, **kwargs: Any) -> Any:
        return hook(**kwargs)

    receiver.__qualname__ = receiver.__name__ = f"on({getattr(hook, '__qualname__', hook)!s})"
    signal.connect(receiver, weak=False, dispatch_uid=uid)
