"""A task's state, read from its mailbox item, and the update log that streams replay.

The state follows the item (``observe``):

- queued (never started) → submitted; queued again, deferred or processing → working;
- deferred, parked for a person's approval → input-required (one update per approval);
- completed → completed, with the reply (the chat's answer, or the agent's answer on the
  bus) as the status message and an artifact; an outside agent's item, completed when it
  was delivered to its bus inbox (``DELIVERED_ON``), is working until the agent answers
  (past ``MARKUS_OUTSIDE_ANSWER_SECONDS`` unanswered, the sweep drops it with a reply
  saying so: failed, below; ``attention.outside.answers_overdue``);
- dropped after the loop gave up (it answered "I could not finish this", or recovery gave
  up) → failed; dropped otherwise (cancelled through this door, or by an operator) →
  canceled. A chat merged into another follows the item it was merged into.

``record_progress`` compares what it observes with the task's last update and, when it
differs, appends the next updates: a status update (after an artifact update with the
reply, for completed). The log is written only there and by ``start_log``, under the
task's row lock, numbered without a gap; every stream reads the same rows, so a
resumed stream (after the last ``sequence`` it saw) gets every later update exactly
once. A state the item passed through while nobody looked (a quick ``working``) is not
in the log: the log says what was observed, in the order it happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from django.db import transaction
from django.utils import timezone
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]

from agentbus.selectors import is_answer, reply_state
from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.chat import reply_answering
from notifications.models import Approval
from notifications.selectors import awaited

from .models import A2ATask, A2ATaskUpdate

S = TaskState
TERMINAL = frozenset({S.TASK_STATE_COMPLETED, S.TASK_STATE_CANCELED, S.TASK_STATE_FAILED, S.TASK_STATE_REJECTED})
INTERRUPTED = frozenset({S.TASK_STATE_INPUT_REQUIRED, S.TASK_STATE_AUTH_REQUIRED})
TERMINAL_NAMES = frozenset(S.Name(s) for s in TERMINAL)
CANCEL_REASON = "cancelled through the A2A door"
REPLY = "reply"  # the artifact's id and name, and the reply message's id suffix
MAX_MERGES = 20


@dataclass(frozen=True)
class Observed:
    state: TaskState
    text: str | None = None  # the agent's words with it: the reply, why it failed, what it waits for
    key: str = ""  # tells two updates of one state apart (the approval waited for)


def _item(task: A2ATask) -> MailboxItem | None:
    """The task's item, or the item it was merged into."""
    item = MailboxItem.objects.filter(id=task.item_id).first() if task.item_id else None
    for _ in range(MAX_MERGES):
        if item is None or item.status != Status.MERGED or not item.merged_into_id:
            break
        item = MailboxItem.objects.filter(id=item.merged_into_id).first()
    return item


def _reply(task: A2ATask, item: MailboxItem) -> str | None:
    """The agent's answer: on the bus (an agent's message), or in the chat session (a
    person's; the reply names the items it answers, this one or the one it was merged into)."""
    if task.stream_id:
        state = reply_state(task.stream_id, task.caller.removeprefix("agent:"))
        if not state["done"]:
            return None
        answer = [c["payload"] for c in state["reply"] if isinstance(c["payload"], dict) and is_answer(c["payload"])]
        texts = [str(p.get("text", "")) for p in answer]
        return "\n".join(t for t in texts if t) or None
    reply = reply_answering({task.id, item.id}, session_id=task.session_id)
    return reply.content if reply is not None else None


def _waiting(item: MailboxItem) -> Observed:
    approval = Approval.objects.select_related("user").filter(id=item.marks.get("approvalId")).first()
    if approval is None:
        return Observed(S.TASK_STATE_INPUT_REQUIRED, "Waiting for a person's approval.", "approval")
    return Observed(S.TASK_STATE_INPUT_REQUIRED, awaited(approval), approval.id)


def observe(task: A2ATask) -> Observed:
    item = _item(task)
    if item is None:
        return Observed(S.TASK_STATE_FAILED, "The message's mailbox item is gone.")
    if item.status == Status.COMPLETED:
        answer = _reply(task, item)
        if answer is None and DELIVERED_ON in item.marks:
            return Observed(S.TASK_STATE_WORKING)  # in an outside agent's inbox, not answered yet
        return Observed(S.TASK_STATE_COMPLETED, answer)
    if item.status == Status.DROPPED:
        answer = _reply(task, item)  # the loop answers whoever waits before it gives up
        if answer is not None or item.drop_reason.startswith("recovery:"):
            return Observed(S.TASK_STATE_FAILED, answer or item.drop_reason)
        return Observed(S.TASK_STATE_CANCELED, item.drop_reason or None)
    if item.status == Status.DEFERRED and item.marks.get("waitingForApproval") is True:
        return _waiting(item)
    if item.status == Status.PROCESSING or item.attempts > 0:
        return Observed(S.TASK_STATE_WORKING)
    return Observed(S.TASK_STATE_SUBMITTED)


# ---------------------------------------------------------------------------- events


def _text_message(task: A2ATask, text: str, message_id: str) -> Message:
    return Message(
        message_id=message_id,
        context_id=task.context_id,
        task_id=task.id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def user_message(task: A2ATask) -> Message:
    message: Message = ParseDict(task.message, Message(), ignore_unknown_fields=True)
    return message


def _status(task: A2ATask, seen: Observed, sequence: int) -> TaskStatus:
    status = TaskStatus(state=seen.state)
    status.timestamp.FromDatetime(timezone.now())
    if seen.text:
        suffix = REPLY if seen.state == S.TASK_STATE_COMPLETED else str(sequence)
        status.message.CopyFrom(_text_message(task, seen.text, f"{task.id}:{suffix}"))
    return status


def _events(task: A2ATask, seen: Observed, after: int) -> list[StreamResponse]:
    events = []
    if seen.state == S.TASK_STATE_COMPLETED and seen.text:
        artifact = Artifact(artifact_id=REPLY, name=REPLY, parts=[Part(text=seen.text)])
        update = TaskArtifactUpdateEvent(task_id=task.id, context_id=task.context_id, artifact=artifact)
        update.last_chunk = True
        update.metadata.update({"sequence": after + 1})
        events.append(StreamResponse(artifact_update=update))
    sequence = after + len(events) + 1
    status = TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=_status(task, seen, sequence))
    status.metadata.update({"sequence": sequence})
    events.append(StreamResponse(status_update=status))
    return events


def start_log(task: A2ATask) -> A2ATaskUpdate:
    """The first update of a new task: the task itself, submitted, with the message.
    Inside the transaction that stores the task."""
    first = Task(id=task.id, context_id=task.context_id, history=[user_message(task)])
    first.status.CopyFrom(_status(task, Observed(S.TASK_STATE_SUBMITTED), 1))
    first.metadata.update({"sequence": 1})
    return A2ATaskUpdate.objects.create(
        task=task, sequence=1, state=S.Name(S.TASK_STATE_SUBMITTED), event=MessageToDict(StreamResponse(task=first))
    )


def record_progress(task_id: str) -> None:
    """Append what changed since the task's last update (see the module docstring).

    1. Lock the task's row; a writer that holds it is recording the same change: skip.
    2. Stop at a terminal state (nothing follows it).
    3. Observe the item (a task once begun never reads as submitted again); when state
       and key differ from the last update, append.
    """
    with transaction.atomic():
        task = A2ATask.objects.select_for_update(skip_locked=True).filter(id=task_id).first()
        if task is None:
            return
        last = task.updates.order_by("-sequence").first()
        if last is None or last.state in TERMINAL_NAMES:
            return
        seen = observe(task)
        if seen.state == S.TASK_STATE_SUBMITTED and last.sequence > 1:
            seen = Observed(S.TASK_STATE_WORKING)  # put back in the queue once begun: not new again
        if (S.Name(seen.state), seen.key) == (last.state, last.key):
            return
        events = _events(task, seen, last.sequence)
        A2ATaskUpdate.objects.bulk_create(
            A2ATaskUpdate(
                task=task,
                sequence=last.sequence + n,
                state=S.Name(seen.state) if n == len(events) else last.state,
                key=seen.key if n == len(events) else last.key,
                event=MessageToDict(event),
            )
            for n, event in enumerate(events, start=1)
        )


# ---------------------------------------------------------------------------- reading


def stream_response(update: A2ATaskUpdate) -> StreamResponse:
    response: StreamResponse = ParseDict(update.event, StreamResponse(), ignore_unknown_fields=True)
    return response


def updates_after(task_id: str, after: int) -> list[A2ATaskUpdate]:
    return list(A2ATaskUpdate.objects.filter(task_id=task_id, sequence__gt=after).order_by("sequence"))


def state_of(update: A2ATaskUpdate) -> TaskState:
    return S.Value(update.state)


def snapshot(task: A2ATask, updates: list[A2ATaskUpdate] | None = None) -> Task:
    """The task as its updates tell it: the last status, the artifacts, the history
    (the message, and the reply once completed), ``metadata.sequence`` the last update's."""
    rows = updates if updates is not None else list(task.updates.order_by("sequence"))
    out = Task(id=task.id, context_id=task.context_id, history=[user_message(task)])
    for row in rows:
        event = stream_response(row)
        kind = event.WhichOneof("payload")
        if kind == "task":
            out.status.CopyFrom(event.task.status)
        elif kind == "status_update":
            out.status.CopyFrom(event.status_update.status)
        elif kind == "artifact_update":
            out.artifacts.append(event.artifact_update.artifact)
    if out.status.state == S.TASK_STATE_COMPLETED and out.status.HasField("message"):
        out.history.append(out.status.message)
    out.metadata.update({"sequence": rows[-1].sequence if rows else 0})
    return out


def sequence_of(event: Any) -> int:
    """The ``metadata.sequence`` of an event (0 when it has none)."""
    value = event.metadata.fields.get("sequence") if event.HasField("metadata") else None
    return int(value.number_value) if value is not None else 0
