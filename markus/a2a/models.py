"""The A2A door's tables: a task per message sent through it, and the task's updates.

``A2ATask`` maps the client's message to what it became in Markus: a ``human_chat`` item
in the chat session of its context (a person's message) or an ``a2a_message`` item and
its bus stream (an agent's). The
client's ``messageId`` is unique per recipient and caller, so a message sent twice makes
one task. Its id is its mailbox item's id, so the A2A task and the item are named alike.

``A2ATaskUpdate`` is the task's update log: every update a stream of the task sends
(the task, each status, the reply's artifact), numbered 1, 2, 3 … per task, written
once (unique on ``(task, sequence)``) and read back as it was written. A stream that was
cut resumes after the last number it saw and gets every later update exactly once
(``markus.a2a.progress``).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class A2ATask(models.Model):
    id = models.CharField(primary_key=True, max_length=64)  # the mailbox item's id
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="a2a_tasks")
    # Who sent it: ``user:<pk>`` or ``agent:<id>`` (agentbus.access.caller_ref).
    caller = models.CharField(max_length=80)
    message_id = models.CharField(max_length=200)
    context_id = models.CharField(max_length=200)
    item = models.ForeignKey(
        "mailbox.MailboxItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="a2a_tasks"
    )
    stream_id = models.CharField(max_length=128, blank=True, default="")  # an agent's message: its bus stream
    # A person's message: the chat session of its context (one per contextId, the person's own).
    session = models.ForeignKey(
        "agents.ChatSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="a2a_tasks"
    )
    message = models.JSONField(default=dict)  # the client's Message as sent (A2A JSON)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "a2a_tasks"
        constraints = [
            models.UniqueConstraint(fields=["agent", "caller", "message_id"], name="a2a_task_one_per_message"),
        ]
        indexes = [models.Index(fields=["agent", "caller", "-created_at"], name="idx_a2a_task_caller")]

    def __str__(self) -> str:
        return f"A2A task {self.id} ({self.caller} → {self.agent_id})"


class A2ATaskUpdate(models.Model):
    task = models.ForeignKey(A2ATask, on_delete=models.CASCADE, related_name="updates")
    sequence = models.PositiveIntegerField()
    state = models.CharField(max_length=40)  # the TaskState name after this update
    # What distinguishes two updates of the same state (the approval an input-required waits for).
    key = models.CharField(max_length=100, blank=True, default="")
    event = models.JSONField()  # the StreamResponse, as A2A JSON
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "a2a_task_updates"
        constraints = [models.UniqueConstraint(fields=["task", "sequence"], name="a2a_update_sequence")]
        ordering = ["task", "sequence"]

    def __str__(self) -> str:
        return f"{self.task_id} #{self.sequence} {self.state}"
