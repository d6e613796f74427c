"""Outside agents (``Agent.kind`` external, a coding CLI) hear everything addressed to
them on their bus inbox, and answer a person's chat on the bus.

The one rule: a mailbox item of an outside agent (a person's chat, a mention, a comment
or a review request on a task, a task's execution with the reviewer's note, anything
enqueued for it) is delivered to its inbox and completed in the mailbox (marked
``DELIVERED_ON``), since no loop drains that mailbox.

1. ``on_item_enqueued`` (the mailbox's ``item_enqueued``) delivers a new item in the
   enqueue's transaction: one chunk from the operator persona on the stream of its
   conversation (``conversation_id``: a chat session, a task, a requirement, else the
   agent's notices), so the items reach the inbox in the order they were said, and the
   waiting ``inbox_wait`` is woken on commit.
2. ``deliver_shelved`` (a sweep hook) delivers what is still queued, oldest first: the
   items queued before this rule, those a failed delivery left, deferred ones come due.
3. The agent answers a person's chat on a stream to the hub (``reply_to`` the chat's
   stream, no recipient: ``agentbus.services.stream_reply``, which the REST API and the
   MCP door's ``bus_reply`` reach);
   ``on_hub_answered`` makes each chunk on it the chat's reply (stored, announced, the
   answer of the chat request still waiting). The chat's own messages are stored at
   delivery, so the conversation shows them before any answer.
4. A person waits for that answer (a chat, over A2A a task ``working``), and no loop or
   worker holds the wait: the delivery sets when the answer is due
   (``MARKUS_OUTSIDE_ANSWER_SECONDS``, kept in the completed item's ``answer_due_at``),
   the answer clears it, and ``answers_overdue`` (a sweep hook) ends a chat still
   unanswered past it: checked once more for an answer, then the person is told in the
   chat (a failed reply), the item dropped (its A2A task fails with that reply), and the
   agent's inbox told that nobody waits any more. An answer that comes later is still
   the chat's reply.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agentbus import services
from agentbus.errors import ConflictError
from agentbus.models import HUB_CHAT_PREFIX, HUB_STREAM_PREFIX, OPERATOR_ID, Chunk, Stream
from mailbox import lifecycle
from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.chat import reply_answering
from markus.agents.models import Agent, ChatMessage, ChatSession
from markus.core.events import CHAT_MESSAGE_EVENT, agent_group, send_event_on_commit
from markus.core.limits import BUS_PAYLOAD_MAX_CHARS

from .replies import post_chat_reply
from .scenarios import row_for
from .session import chat_session_id

log = logging.getLogger(__name__)

__all__ = ["HUB_CHAT_PREFIX", "HUB_STREAM_PREFIX", "answers_overdue", "chat_stream_id", "deliver", "deliver_shelved"]

# Room kept under the bus's payload limit for the fields around a text cut to fit.
CUT_MARGIN = 500
SUMMARY_CHARS = 300  # a summary is one line; a longer one is cut
SHELVED_BATCH = 200  # items the sweep delivers per run
OVERDUE_BATCH = 200  # unanswered chats the sweep ends per run
ANSWER_TIMED_OUT = "answer_timed_out"  # the topic of the inbox's notice that nobody waits any more
# Whether an agent is outside, as this process last read it: an enqueue stays one INSERT
# (the mailbox's statement budget) instead of also reading the agent's row. A kind
# changed in another process is seen within KIND_TTL_SECONDS; meanwhile the sweep
# delivers what stayed queued, and ``deliver`` checks the row itself.
KIND_TTL_SECONDS = 60.0
KIND_CACHE_MAX = 10_000
_outside_kinds: dict[str, tuple[bool, float]] = {}


def chat_stream_id(session_id: str) -> str:
    return f"{HUB_CHAT_PREFIX}{session_id}"


def conversation_id(item: MailboxItem) -> tuple[str, str]:
    """The stream the item goes on and that stream's topic: one per chat session, per
    task or requirement (for this agent), else the agent's notices."""
    if row_for(item).in_chat:
        return chat_stream_id(chat_session_id(item)), "chat"
    if item.task_id:
        return f"{HUB_STREAM_PREFIX}task.{item.task_id}.{item.agent_id}", "task"
    if item.requirement_id:
        return f"{HUB_STREAM_PREFIX}requirement.{item.requirement_id}.{item.agent_id}", "requirement"
    return f"{HUB_STREAM_PREFIX}notices.{item.agent_id}", "notices"


def _stream(agent: Agent, stream_id: str, topic: str) -> Stream:
    """The conversation's stream, opened by the operator persona on first use."""
    found = Stream.objects.filter(id=stream_id).first()
    if found is not None:
        return found
    try:
        return services.stream_open(sender=None, recipient=agent, topic=topic, stream_id=stream_id, actor=OPERATOR_ID)
    except ConflictError:  # opened meanwhile by a concurrent delivery
        return Stream.objects.get(id=stream_id)


def message_payload(item: MailboxItem, session_id: str | None) -> dict[str, Any]:
    """What the agent reads: the text, who said it, and the ids it answers with (the
    task or requirement, the comment, the chat session). A text past the bus's limit
    is cut, saying so (``truncated``; the whole of it is in the mailbox item): each
    character cut takes at least one off the JSON, so the cut text fits."""
    meta = item.metadata or {}
    sender = (
        {"type": meta.get("senderRole"), "id": str(meta["senderId"]), "name": meta.get("senderName")}
        if meta.get("senderId") is not None
        else None
    )
    fields = {
        "taskId": item.task_id,
        "requirementId": item.requirement_id,
        "commentId": meta.get("commentId"),
        "sessionId": session_id,
    }
    payload: dict[str, Any] = {
        "text": item.content or item.summary,
        "summary": item.summary[:SUMMARY_CHARS],
        "from": sender,
        "mailboxItemId": item.id,
        **{k: v for k, v in fields.items() if v},
    }
    if item.extra:
        payload["extra"] = item.extra
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str))
    if size > BUS_PAYLOAD_MAX_CHARS:
        keep = max(0, len(payload["text"]) - (size - BUS_PAYLOAD_MAX_CHARS) - CUT_MARGIN)
        payload.update(text=payload["text"][:keep] + f"… (cut at {keep} characters)", truncated=True)
        payload.pop("extra", None)
    return payload


def deliver(item_id: str) -> Chunk | None:
    """Deliver one queued item of an outside agent to its inbox and complete it, in one
    transaction (the caller's, when there is one). None when it is no longer queued."""
    with transaction.atomic():
        item = MailboxItem.objects.select_for_update().filter(id=item_id, status=Status.QUEUED).first()
        if item is None:
            return None
        agent = Agent.objects.get(id=item.agent_id)
        if agent.kind != Agent.Kind.EXTERNAL:  # made internal since: its loop takes it
            return None
        stream_id, topic = conversation_id(item)
        session_id = stream_id.removeprefix(HUB_CHAT_PREFIX) if topic == "chat" else None
        stream = _stream(agent, stream_id, topic)
        chunk = services.stream_append(
            stream_id=stream.id,
            sender=None,
            payload=message_payload(item, session_id),
            topic=item.source_type,
            actor=OPERATOR_ID,
        )
        if session_id is not None:  # the conversation shows the person's message at once
            ChatMessage.objects.create(
                session_id=session_id,
                role=ChatMessage.Role.USER,
                content=item.content,
                metadata={"mailboxItemId": item.id, "senderId": (item.metadata or {}).get("senderId")},
            )
            ChatSession.objects.filter(id=session_id).update(last_message_at=chunk.created_at)
        due = timezone.now() + timedelta(seconds=answer_seconds()) if session_id is not None else None
        lifecycle.deliver(item, stream_id=stream.id, answer_due=due)
    return chunk


def answer_seconds() -> float:
    """How long a person waits for an outside agent's answer to their chat (at least 1 s)."""
    return max(1.0, float(settings.MARKUS.get("OUTSIDE_ANSWER_SECONDS", 3600.0)))


def _outside(agent_id: str) -> bool:
    known = _outside_kinds.get(agent_id)
    if known is not None and known[1] > time.monotonic():
        return known[0]
    outside = Agent.objects.filter(id=agent_id, kind=Agent.Kind.EXTERNAL).exists()
    _know_kind(agent_id, outside)
    return outside


def _know_kind(agent_id: str, outside: bool) -> None:
    if len(_outside_kinds) >= KIND_CACHE_MAX:
        _outside_kinds.clear()
    _outside_kinds[agent_id] = (outside, time.monotonic() + KIND_TTL_SECONDS)


def on_agent_saved(sender: type[Agent], instance: Agent, **kwargs: object) -> None:
    """``post_save`` of an agent: this process knows its kind as saved."""
    _know_kind(instance.id, instance.kind == Agent.Kind.EXTERNAL)


def on_agent_deleted(sender: type[Agent], instance: Agent, **kwargs: object) -> None:
    _outside_kinds.pop(instance.id, None)


def on_item_enqueued(sender: type[MailboxItem], item: MailboxItem, **kwargs: object) -> None:
    """The mailbox's ``item_enqueued``: an outside agent's new item goes to its inbox. A
    delivery that fails leaves the item queued for the sweep (and never fails the enqueue)."""
    if item.status != Status.QUEUED or not _outside(item.agent_id):
        return
    try:
        deliver(item.id)
    except Exception:
        log.exception("agentbus: item %s not delivered to %s's inbox; the sweep tries again", item.id, item.agent_id)


def deliver_shelved() -> int:
    """The sweep's backstop: outside agents' due deferred items are queued again, then
    every queued one is delivered, oldest first. Returns how many were delivered."""
    outside = list(Agent.objects.filter(kind=Agent.Kind.EXTERNAL).values_list("id", flat=True))
    if not outside:
        return 0
    deferred = MailboxItem.objects.filter(agent_id__in=outside, status=Status.DEFERRED)
    for agent_id in deferred.values_list("agent_id", flat=True).distinct():
        lifecycle.resurface_due(agent_id)
    shelved = MailboxItem.objects.filter(agent_id__in=outside, status=Status.QUEUED).order_by("queued_at", "id")
    delivered = 0
    for item_id in list(shelved.values_list("id", flat=True)[:SHELVED_BATCH]):
        try:
            delivered += deliver(item_id) is not None
        except Exception:
            log.exception("agentbus: shelved item %s not delivered", item_id)
    return delivered


# ------------------------------------------------------------------------ answers


def _answered(session_id: str) -> list[str]:
    """The person's items the next reply in the session answers: those said since the
    session's last reply."""
    last = (
        ChatMessage.objects.filter(session_id=session_id, role=ChatMessage.Role.ASSISTANT)
        .order_by("-created_at", "-id")
        .first()
    )
    said = ChatMessage.objects.filter(session_id=session_id, role=ChatMessage.Role.USER)
    if last is not None:
        said = said.filter(Q(created_at__gt=last.created_at) | Q(created_at=last.created_at, id__gt=last.id))
    ids = said.order_by("created_at", "id").values_list("metadata__mailboxItemId", flat=True)
    return [i for i in ids if isinstance(i, str)]


def on_hub_answered(sender: type[Stream], stream: Stream, chunk: Chunk, **kwargs: object) -> None:
    """The bus's ``hub_answered``: an agent's chunk on its answer to a person's chat is
    the chat's reply, stored and announced on commit (the chat request waiting for it,
    the chat page, the mind view)."""
    original = stream.reply_to or ""
    if not original.startswith(HUB_CHAT_PREFIX):
        return
    session = ChatSession.objects.filter(id=original.removeprefix(HUB_CHAT_PREFIX), agent_id=chunk.sender_id).first()
    if session is None:
        return
    answered = _answered(session.id)
    reply = post_chat_reply(
        session.agent_id,
        session.id,
        services.message_text(chunk.payload),
        answered=answered,
        metadata={"streamId": chunk.stream_id, "sequence": chunk.sequence},
    )
    lifecycle.answer_came(answered)  # nobody waits for these any more: no deadline ends them
    pushed = {
        "agentId": session.agent_id,
        "sessionId": session.id,
        "message": {
            "id": reply.pk,
            "role": reply.role,
            "content": reply.content,
            "metadata": reply.metadata,
            "createdAt": reply.created_at,
        },
    }
    # A person's own session is theirs: the agent's other watchers hear nothing of it.
    owner = session.user_id if session.user_id is not None and not session.is_main else None
    send_event_on_commit(agent_group(session.agent_id), CHAT_MESSAGE_EVENT, pushed, private_to=owner)


# ------------------------------------------------------------------------ silence


def answers_overdue(*, now: datetime | None = None) -> list[str]:
    """The sweep's backstop for a person waiting on an outside agent that does not
    answer (its harness gone, frozen, or silent): every delivered chat whose answer was
    due by ``now`` and has not come is ended (``_end_unanswered``), each in its own
    transaction, the soonest due first. Returns the ids ended."""
    now = now or timezone.now()
    due = list(lifecycle.answers_due(now).order_by("answer_due_at").values_list("id", "agent_id")[:OVERDUE_BATCH])
    # The agents' names, read once for the batch (not once per chat ended).
    names = dict(Agent.objects.filter(id__in={agent_id for _, agent_id in due}).values_list("id", "name"))
    ended = []
    for item_id, agent_id in due:
        try:
            if _end_unanswered(item_id, now, name=names.get(agent_id, agent_id)):
                ended.append(item_id)
        except Exception:
            log.exception("agentbus: the unanswered chat %s was not ended; the next sweep tries again", item_id)
    if ended:
        log.info("agentbus: chats an outside agent did not answer in time, ended: %s", ended)
    return ended


def _end_unanswered(item_id: str, now: datetime, *, name: str) -> bool:
    """1. Lock the item; still delivered and due? 2. Answered after all (checked once
    more before giving up)? Then only its deadline goes. 3. Else the person is told in
    the chat (a failed reply answering the item), the item is dropped saying why (its
    A2A task fails with that reply), and the agent's inbox hears nobody waits."""
    with transaction.atomic():
        item = (
            MailboxItem.objects.select_for_update()
            .filter(id=item_id, status=Status.COMPLETED, answer_due_at__lte=now)
            .first()
        )
        if item is None or DELIVERED_ON not in item.marks:
            return False
        session_id = chat_session_id(item)
        if reply_answering({item.id}, session_id=session_id) is not None:
            lifecycle.answer_came([item.id])
            return False
        waited = _span(((item.answer_due_at or now) - (item.completed_at or now)).total_seconds())
        note = (
            f"{name} (an outside agent) did not answer within {waited}, so this message is closed without "
            "an answer. It stays in the agent's inbox: an answer that comes later still shows here."
        )
        post_chat_reply(item.agent_id, session_id, note, answered=[item.id], metadata={"failed": True})
        lifecycle.answer_overdue(item, reason=f"unanswered: {name} did not answer within {waited}")
        _tell_inbox(item, session_id, waited)
    return True


def _tell_inbox(item: MailboxItem, session_id: str, waited: str) -> None:
    """Best effort: the agent hears, on the chat's stream, that the person no longer
    waits (the bus's counterpart of cancelling the task it was given)."""
    who = (item.metadata or {}).get("senderName") or "The person"
    text = (
        f"{who} no longer waits for your answer to their message (mailboxItemId {item.id}): it was not "
        f"answered within {waited}, and they were told so. An answer on this chat still reaches them."
    )
    try:
        with transaction.atomic():
            services.stream_append(
                stream_id=str(item.marks[DELIVERED_ON]),
                sender=None,
                payload={"text": text, "mailboxItemId": item.id, "sessionId": session_id},
                topic=ANSWER_TIMED_OUT,
                actor=OPERATOR_ID,
            )
    except Exception:
        log.warning("agentbus: %s's inbox was not told that nobody waits for %s", item.agent_id, item.id, exc_info=True)


def _span(seconds: float) -> str:
    """``1 hour``, ``30 minutes``, ``45 seconds``: the largest whole unit."""
    whole = max(0, round(seconds))
    for unit, size in (("hour", 3600), ("minute", 60)):
        if whole >= size and whole % size == 0:
            count = whole // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{whole} second{'' if whole == 1 else 's'}"
