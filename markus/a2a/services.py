"""Writes of the A2A door: send a message (a task), cancel a task.

A person's message becomes a ``human_chat`` in the chat session of its context: a new
session of that person for a new context (its id is the ``contextId``), the same session
for a later message of the context. An agent's message goes on the AgentBus (a new
direct stream, ``agentbus.services.send_agent_message``), which puts it in the
recipient's mailbox as an ``a2a_message``; its answer comes back on a reply stream.
Either way the task is stored with its item, in the transaction that enqueues it, and a
``messageId`` sent again answers the task it made the first time.

An outside agent (``kind`` external) takes a person's message the same way: the chat's
item is delivered to its bus inbox as it is enqueued (``attention.outside``), and its
answer in that chat is the task's reply. An agent's message to it is refused: the bus
reaches it directly (``bus_request``)."""

from __future__ import annotations

import json

from a2a.types import Message
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from agentbus.access import caller_ref
from agentbus.services import send_agent_message, stream_close
from attention.operator import OperatorError, drop_item
from mailbox.api import sender_metadata
from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.auth import Caller, acting_agent
from markus.agents.chat import session_create, session_marks, visible_sessions
from markus.agents.models import Agent, ChatSession
from markus.core.limits import CHAT_TEXT_MAX_CHARS
from notifications.services import approval_cancel

from .access import access_task, caller_tasks
from .models import A2ATask
from .progress import CANCEL_REASON, TERMINAL, observe, record_progress, start_log

SESSION_TITLE_CHARS = 60


def message_text(message: Message) -> str:
    """The text of a message: its text parts, and its data parts as JSON, one per line."""
    lines = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            lines.append(part.text)
        elif kind == "data":
            lines.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        else:
            raise ContentTypeNotSupportedError(message="this agent reads text and data parts only")
    text = "\n".join(lines).strip()
    if not text:
        raise InvalidParamsError(message="the message has no text")
    if len(text) > CHAT_TEXT_MAX_CHARS:
        raise InvalidParamsError(message=f"the message is longer than {CHAT_TEXT_MAX_CHARS} characters")
    return text


def _check_recipient(caller: Caller, agent: Agent) -> None:
    """An outside agent takes a person's message (a chat, delivered to its bus inbox); an
    agent reaches it on the bus itself, where its answer comes back to the asker."""
    if agent.kind == Agent.Kind.EXTERNAL and acting_agent(caller) is not None:
        raise UnsupportedOperationError(
            message="this agent is outside Markus: an agent reaches it over the AgentBus "
            "(bus_request, which waits for its answer)"
        )
    if agent.status != Agent.RunStatus.RUNNING:
        raise UnsupportedOperationError(message=f"this agent is {agent.status}; it takes messages when running")


def _session(caller: Caller, agent: Agent, context_id: str, text: str) -> ChatSession:
    """The chat session of a person's context: a session of theirs with that id, or the
    one an earlier task of the context used; else a new one."""
    if context_id:
        found = visible_sessions(caller, agent).filter(id=context_id).first()
        if found is None:
            earlier = caller_tasks(caller, agent).filter(context_id=context_id, session__isnull=False).first()
            found = earlier.session if earlier is not None else None
        if found is not None:
            return found
    return session_create(caller, agent, f"A2A: {text[:SESSION_TITLE_CHARS]}")


def _enqueue(
    caller: Caller, agent: Agent, message: Message, text: str
) -> tuple[MailboxItem, str, str, ChatSession | None]:
    """The item, the context id, the bus stream and the chat session of a new task."""
    sender = acting_agent(caller)
    if sender is not None:
        if sender.id == agent.id:
            raise InvalidParamsError(message="an agent does not send messages to itself")
        chunk = send_agent_message(sender=sender, recipient=agent, text=text, actor=f"agent:{sender.id}")
        item = (
            MailboxItem.objects.filter(
                agent=agent, source_type=MailboxType.A2A_MESSAGE, marks__streamId=chunk.stream_id
            )
            .order_by("queued_at", "id")
            .first()
        )
        assert item is not None  # an internal recipient hears the bus through its mailbox
        return item, message.context_id or chunk.stream_id, chunk.stream_id, None
    session = _session(caller, agent, message.context_id, text)
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:120], "content": text},
        metadata=sender_metadata(caller, {"sessionId": session.id}),
        marks=session_marks(session),
    )
    return item, message.context_id or session.id, "", session


def task_send(*, caller: Caller, agent: Agent, message: Message) -> A2ATask:
    """The task of ``message``: the one it made already (same ``messageId``), or a new one.

    1. A known messageId answers its task (before any check: a retry is not refused).
    2. The recipient must run; the message must be text (and not name a task: a task
       takes one message, a conversation goes on in its context).
    3. Enqueue, store the task and its first update in one transaction; a concurrent
       twin loses on the unique constraint, rolls back its item and answers the winner's.
    """
    known = caller_tasks(caller, agent).filter(message_id=message.message_id).first()
    if known is not None:
        return known
    if message.task_id:
        if access_task(caller, agent, message.task_id) is None:
            raise TaskNotFoundError
        raise UnsupportedOperationError(
            message="a task takes one message: send a new one (with the same contextId to go on)"
        )
    _check_recipient(caller, agent)
    text = message_text(message)
    try:
        with transaction.atomic():
            item, context_id, stream_id, session = _enqueue(caller, agent, message, text)
            stored = Message()
            stored.CopyFrom(message)
            stored.task_id, stored.context_id = item.id, context_id
            task = A2ATask.objects.create(
                id=item.id,
                agent=agent,
                caller=caller_ref(caller),
                message_id=message.message_id,
                context_id=context_id,
                item=item,
                stream_id=stream_id,
                session=session,
                message=MessageToDict(stored),
            )
            start_log(task)
    except IntegrityError:
        twin = caller_tasks(caller, agent).filter(message_id=message.message_id).first()
        if twin is None:
            raise
        return twin
    return task


class _AgentOperator(AnonymousUser):
    """An agent cancelling its own message, named as the operator of the drop."""

    def __init__(self, agent: Agent) -> None:
        self.agent_id = agent.id

    def get_username(self) -> str:
        return f"agent {self.agent_id}"


def task_cancel(*, caller: Caller, task: A2ATask) -> None:
    """Withdraw a task's message: its item is dropped (``attention.operator.drop_item``)
    while it waits (queued, deferred, parked: its approval is cancelled too). One the agent
    is working on right now, one delivered to an outside agent's inbox, or a finished one,
    is not cancelable."""
    seen = observe(task)
    item = MailboxItem.objects.filter(id=task.item_id).first() if task.item_id else None
    if seen.state in TERMINAL or item is None:
        raise TaskNotCancelableError(message="the task is finished")
    if DELIVERED_ON in item.marks:
        raise TaskNotCancelableError(message="the message is in the outside agent's inbox already: it is not withdrawn")
    if item.status == Status.PROCESSING:
        raise TaskNotCancelableError(message="the agent is working on it right now; it is not withdrawn midway")
    if item.status == Status.MERGED:
        raise TaskNotCancelableError(message="the message was folded into another one the agent answers together")
    acting = acting_agent(caller)
    operator = caller.user if acting is None else _AgentOperator(acting)
    try:
        with transaction.atomic():
            dropped = drop_item(item_id=item.id, reason=CANCEL_REASON, operator=operator)
            approval_id = dropped.marks.get("approvalId")
            if dropped.marks.get("waitingForApproval") is True and isinstance(approval_id, str):
                approval_cancel(approval_id=approval_id)
            if task.stream_id and acting is not None:
                stream_close(stream_id=task.stream_id, sender=acting, actor=f"agent:{acting.id}")
    except OperatorError as exc:
        raise TaskNotCancelableError(message=str(exc)) from None
    record_progress(task.id)
