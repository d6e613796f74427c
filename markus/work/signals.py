"""Signals other apps may listen to (the AgentBus outbox puts task lifecycle on the
bus). Sent inside the transition's transaction, holding the task row lock; a receiver
that writes rows commits or rolls back with the transition."""

from __future__ import annotations

from django.dispatch import Signal

# kwargs: task, from_status, to_status, actor (markus.core.actors.Actor), note
task_status_changed = Signal()
# kwargs: requirement, from_status, to_status, actor, note
requirement_status_changed = Signal()
