"""Writes on the bus: open, append, close, send an agent's message, drain and
acknowledge the inbox. Every action is audited. Callers pass Agent rows they have
already checked (``agentbus.access``); ``sender=None`` is the operator persona.

Rules: a direct stream carries its sender's messages to one recipient (a reply is a
new stream back, with ``reply_to``); a group stream carries its members' messages to
the other members. An agent's answer to a person's chat (``attention.outside``) is a
stream to the hub: no recipient, ``reply_to`` the chat's stream. Only the sender
closes a stream; a closed stream takes no more chunks (409). Draining never closes
anything.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from mailbox.idempotency import HEADER as KEY_HEADER
from mailbox.idempotency import KeyReused
from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.core import signals
from markus.core.limits import BUS_PAYLOAD_MAX_CHARS

from . import selectors
from .cursors import decode_cursor, encode_cursor
from .errors import BusError, ConflictError, ForbiddenError, NotFoundError
from .models import (
    DEFAULT_TOPIC,
    HUB_CHAT_PREFIX,
    HUB_STREAM_PREFIX,
    INBOX_TOPIC,
    OPERATOR_ID,
    AuditAction,
    AuditEvent,
    Chunk,
    ConsumerCursor,
    InboxClock,
    Stream,
    StreamMember,
)
from .pace import check_pace
from .wakeup import wake_inboxes_on_commit

# Sent when a reply stream closes and when an agent answers a person's chat on the hub
# (``markus.core.signals``, the set of signals that go up).
reply_closed = signals.reply_closed
hub_answered = signals.hub_answered
STREAM_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # the whole id (fullmatch: no trailing newline)
# What a label printed on one line (a topic, a group chat's name) may not hold: the C0
# controls, DEL, the C1 controls (NEL among them) and the line and paragraph separators.
# Each ends a line somewhere, so a sender could forge what reads as another message.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
OPERATOR_STREAM_PREFIX = "outbox."  # the outbox relay's stream ids; nobody else may take them
TEAM_CHANNEL_PREFIX = "group:"  # the teams' group channels (agentbus.team_channel)
# Stream ids are one namespace: a taken id answers this (409) whoever holds it, naming
# neither the id nor its stream, so it tells nothing about streams the caller may not see.
STREAM_ID_NOT_AVAILABLE = "streamId not available: choose another (or leave it out for a generated one)"
MAX_TOPIC = 200
# A lost compare-and-set is retried after a jittered back-off, for at most this long.
CAS_DEADLINE_SECONDS = 10.0


def audit(
    *,
    action: str,
    actor: str,
    agent_id: str | None = None,
    stream_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    AuditEvent.objects.create(
        action=action, actor=actor or "unknown", agent_id=agent_id, stream_id=stream_id, detail=detail or {}
    )


def _ref(agent: Agent | None) -> str:
    return agent.id if agent is not None else OPERATOR_ID


def _actor(actor: str, agent: Agent | None) -> str:
    return actor or (f"agent:{agent.id}" if agent is not None else OPERATOR_ID)


def check_label(field: str, value: str) -> None:
    """Refuse a control character or a line break in a one-line label (400 naming the
    field). Rows stored before this rule are not rewritten: readers escape what they print."""
    found = CONTROL_CHARACTERS.search(value)
    if found is not None:
        raise BusError(f"{field} must not contain control characters or line breaks (found U+{ord(found[0]):04X})")


def _check_topic(topic: object, default: str) -> str:
    if topic in (None, ""):
        return default
    if not isinstance(topic, str) or len(topic) > MAX_TOPIC:
        raise BusError(f"topic must be a string of at most {MAX_TOPIC} characters")
    check_label("topic", topic)
    return topic


# ------------------------------------------------------------------------- streams


@transaction.atomic
def stream_open(
    *,
    sender: Agent | None,
    recipient: Agent | None = None,
    members: Sequence[Agent] = (),
    topic: str | None = None,
    stream_id: str | None = None,
    reply_to: str | None = None,
    actor: str = "",
) -> Stream:
    """Open a direct stream (``recipient``) or a group stream (``members``; the
    sender becomes a member too)."""
    if stream_id is not None and (not isinstance(stream_id, str) or not STREAM_ID_RE.fullmatch(stream_id)):
        raise BusError("streamId may hold letters, digits, '_', '-', '.' and ':', at most 128 characters")
    if stream_id is not None and not stream_id.strip("."):
        # ``.`` and ``..`` are path segments: the stream's URLs would not name it.
        raise BusError("streamId must not be made only of dots")
    if (
        stream_id is not None
        and sender is not None
        and stream_id.startswith((OPERATOR_STREAM_PREFIX, HUB_STREAM_PREFIX))
    ):
        raise BusError(f"stream ids starting with {OPERATOR_STREAM_PREFIX!r} or {HUB_STREAM_PREFIX!r} are reserved")
    if stream_id is not None and stream_id.startswith(TEAM_CHANNEL_PREFIX):
        raise BusError(f"stream ids starting with {TEAM_CHANNEL_PREFIX!r} are the teams' channels")
    # An answer to a person's chat goes to the hub: a direct stream without a recipient.
    to_hub = sender is not None and recipient is None and not members and _is_hub_chat(reply_to)
    if (recipient is None) == (not members) and not to_hub:
        raise BusError("give either a recipient (a direct stream) or members (a group stream)")
    if recipient is not None and sender is not None and recipient.id == sender.id:
        raise BusError("an agent cannot open a stream to itself")
    group = {m.id: m for m in members}
    if sender is not None:
        group.pop(sender.id, None)
    if members and not group:
        raise BusError("a group stream needs at least one member besides its sender")
    if reply_to is not None:
        original = Stream.objects.filter(id=reply_to).first()
        if original is None or (sender is not None and sender.id not in selectors.stream_audience(original)):
            raise NotFoundError("No such stream to reply to.")
    stream = Stream(
        sender=sender,
        recipient=recipient,
        is_group=bool(members),
        reply_to=reply_to,
        topic=_check_topic(topic, DEFAULT_TOPIC),
    )
    if stream_id is not None:
        stream.id = stream_id
    try:
        with transaction.atomic():
            stream.save(force_insert=True)
    except IntegrityError as exc:
        # The same answer whoever holds the id (the caller, or a stream it may not see).
        raise ConflictError(STREAM_ID_NOT_AVAILABLE) from exc
    if members:
        everyone = list(group) + ([sender.id] if sender is not None else [])
        StreamMember.objects.bulk_create([StreamMember(stream=stream, agent_id=a) for a in sorted(everyone)])
    audit(
        action=AuditAction.OPEN,
        actor=_actor(actor, sender),
        agent_id=_ref(sender),
        stream_id=stream.id,
        detail={"recipient": stream.recipient_id, "members": sorted(group), "topic": stream.topic, "replyTo": reply_to},
    )
    return stream


def _is_hub_chat(stream_id: object) -> bool:
    return isinstance(stream_id, str) and stream_id.startswith(HUB_CHAT_PREFIX)


def _next_position() -> int:
    """Take the next inbox position. Must be the last write of the append transaction:
    the counter row stays locked until commit (see ``models``)."""
    table = connection.ops.quote_name(InboxClock._meta.db_table)
    sql = f"UPDATE {table} SET value = value + 1 WHERE id = 1 RETURNING value"
    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute(sql)
            row = cursor.fetchone()
        if row is not None:
            return int(row[0])
        try:  # the row is created by the migration; a flushed test database lacks it
            with transaction.atomic():
                InboxClock.objects.create(id=1, value=0)
        except IntegrityError:
            pass
    raise RuntimeError("agentbus: could not take an inbox position")


def _consume_for_mailbox(agent_ids: list[str], have_cursor: set[str], position: int) -> None:
    """Move the consumer cursors of internal agents past the chunk at ``position``, in
    the append's transaction: their mailbox took it (an agent's message as an
    ``a2a_message``; the operator's records, such as task lifecycle, reach them as the
    work notices), so their bus inbox must not count it as waiting. Never moves a
    cursor back. Runs after the position is taken (the clock's row lock orders the
    appends, so two of them never race here); a concurrent ``drain`` or ack of the same
    agent loses its compare-and-set and retries from the moved cursor."""
    if not agent_ids:
        return
    now = timezone.now()
    missing = [a for a in agent_ids if a not in have_cursor]
    if missing:
        ConsumerCursor.objects.bulk_create(
            [
                ConsumerCursor(
                    agent_id=a, topic=INBOX_TOPIC, cursor=encode_cursor(a, position), position=position, updated_at=now
                )
                for a in missing
            ],
            ignore_conflicts=True,  # created meanwhile (a drain): the update below moves it
        )
    ConsumerCursor.objects.filter(agent_id__in=agent_ids, topic=INBOX_TOPIC, position__lt=position).update(
        position=position,
        cursor=Case(*[When(agent_id=a, then=Value(encode_cursor(a, position))) for a in agent_ids]),
        updated_at=now,
    )


def _may_append(stream: Stream, sender: Agent | None) -> bool:
    if stream.is_group:
        return sender is not None and StreamMember.objects.filter(stream=stream, agent_id=sender.id).exists()
    return stream.sender_id == (sender.id if sender is not None else None)


def message_text(payload: dict[str, Any]) -> str:
    for key in ("text", "content", "message"):
        if isinstance(payload.get(key), str):
            return payload[key]
    return json.dumps(payload, ensure_ascii=False, sort_keys=True)


def _internal(audience: list[str]) -> list[str]:
    """The agents of ``audience`` the attention loop runs (not external harnesses)."""
    if not audience:
        return []
    return sorted(Agent.objects.filter(id__in=audience, kind=Agent.Kind.INTERNAL).values_list("id", flat=True))


def _enqueue_for_attention(
    stream: Stream, sender: Agent, sequence: int, payload: dict[str, Any], internal: list[str]
) -> None:
    """ARCHITECTURE decision 7: an agent the attention loop runs hears the bus through
    its mailbox; the channel key is the stream, so a burst coalesces."""
    text = message_text(payload)
    first_line = (text.strip().splitlines() or [""])[0]
    who = sender.name
    extra: dict[str, Any] = {"channelKey": stream.id}
    if stream.is_group:  # the group's name and id, so the reader can answer the group
        name = selectors.group_name(stream)
        who = f"{sender.name} in group {name!r}"
        extra.update(groupId=stream.id, groupName=name)
    summary = f"{who}: {first_line[:120]}" if first_line else f"Message from {who}"
    for agent_id in internal:
        mailbox_enqueue(
            agent_id=agent_id,
            source_type=MailboxType.A2A_MESSAGE,
            payload={"summary": summary, "content": text, "extra": extra},
            metadata={"senderId": sender.id, "senderName": sender.name, "senderRole": "agent", "sequence": sequence},
            marks={"streamId": stream.id},  # the stream its answer goes to
        )


def _check_outside_pace(stream: Stream, sender: Agent) -> None:
    """An outside agent's messages to agents the loop runs keep ``agentbus.pace``: each is
    an item a model answers (429 past it, nothing written)."""
    if stream.is_group:
        check_pace(sender, f"group {selectors.group_name(stream)!r}", stream=stream)
    elif stream.recipient is not None:
        check_pace(sender, stream.recipient.name, recipient=stream.recipient)


def stream_append(
    *,
    stream_id: str,
    sender: Agent | None,
    payload: object,
    topic: str | None = None,
    actor: str = "",
) -> Chunk:
    """Append a chunk (``stream_append_once`` without a key)."""
    chunk, _ = stream_append_once(stream_id=stream_id, sender=sender, payload=payload, topic=topic, actor=actor)
    return chunk


@transaction.atomic
def stream_append_once(
    *,
    stream_id: str,
    sender: Agent | None,
    payload: object,
    topic: str | None = None,
    actor: str = "",
    request_key: str | None = None,
) -> tuple[Chunk, bool]:
    """Append a chunk: the next sequence of the stream, the next inbox position; and
    False. ``payload`` comes from the caller as is and must be a JSON object (else 400).
    With the ``request_key`` (an ``Idempotency-Key``) of a message this sender appended
    to this stream before: that chunk and True, nothing written (a closed stream, the
    pace, do not refuse it: it was sent); with another message, ``KeyReused`` (422).

    1. Lock the stream row (serialises the stream's sequence and its keys; a close
       waits for us).
    2. Write everything else: sequence, mailbox items for internal recipients, audit.
    3. Take the inbox position last and insert the chunk, so the clock's row lock is
       held only for the insert, the internal recipients' cursors (moved past the
       chunk: their mailbox took it, ``_consume_for_mailbox``) and the commit.
    """
    if not isinstance(payload, dict):
        raise BusError("payload must be a JSON object")
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str))
    if size > BUS_PAYLOAD_MAX_CHARS:
        raise BusError(f"payload is {size} characters as JSON; a message may have at most {BUS_PAYLOAD_MAX_CHARS}")
    stream = Stream.objects.select_for_update().filter(id=stream_id).first()
    if stream is None:
        raise NotFoundError("No such stream.")
    if not _may_append(stream, sender):
        raise ForbiddenError(
            "only the stream's sender may append to a direct stream (answer on a new stream with replyTo), "
            "and only members to a group stream"
        )
    if request_key is not None and (earlier := _sent_with(stream, sender, request_key, payload, topic)) is not None:
        return earlier, True
    if stream.closed_at is not None:
        raise ConflictError(f"stream {stream.id!r} is closed")
    topic = _check_topic(topic, stream.topic)
    audience = [a for a in selectors.stream_audience(stream) if sender is None or a != sender.id]
    internal = _internal(audience)
    if sender is not None and internal and sender.kind == Agent.Kind.EXTERNAL:
        _check_outside_pace(stream, sender)
    sequence = stream.last_sequence + 1
    Stream.objects.filter(id=stream.id).update(last_sequence=sequence)
    if sender is not None and internal:
        _enqueue_for_attention(stream, sender, sequence, payload, internal)
    have_cursor = (
        set(ConsumerCursor.objects.filter(agent_id__in=internal, topic=INBOX_TOPIC).values_list("agent_id", flat=True))
        if internal
        else set()
    )
    audit(
        action=AuditAction.APPEND,
        actor=_actor(actor, sender),
        agent_id=_ref(sender),
        stream_id=stream.id,
        detail={"sequence": sequence, "topic": topic},
    )
    position = _next_position()
    chunk = Chunk.objects.create(
        stream=stream,
        sequence=sequence,
        sender=sender,
        recipient_id=None if stream.is_group else stream.recipient_id,
        topic=topic,
        payload=payload,
        position=position,
        created_at=timezone.now(),
        request_key=request_key,
    )
    _consume_for_mailbox(internal, have_cursor, position)
    wake_inboxes_on_commit(audience, position=position, message=selectors.chunk_data(chunk))
    if stream.recipient_id is None and not stream.is_group and sender is not None:
        hub_answered.send(sender=Stream, stream=stream, chunk=chunk)
    return chunk, False


@transaction.atomic
def stream_send_once(
    *,
    sender: Agent,
    recipient: Agent,
    payload: object,
    topic: str | None = None,
    actor: str = "",
    request_key: str | None = None,
) -> tuple[Stream, Chunk, bool]:
    """A message on a new stream to ``recipient`` (``stream_open``, then the append), and
    False. With the ``request_key`` of a message the sender began a stream with before:
    that stream and message, and True, nothing written; the key with another message or
    another recipient: ``KeyReused`` (422). The sender's row lock orders its keyed sends,
    so retries racing each other open one stream."""
    if request_key is not None:
        Agent.objects.select_for_update().filter(id=sender.id).values_list("id", flat=True).first()
        earlier = (
            Chunk.objects.filter(sender=sender, request_key=request_key, sequence=1, stream__sender=sender)
            .select_related("stream")
            .first()
        )
        if earlier is not None:
            if earlier.stream.recipient_id != recipient.id:
                raise KeyReused(
                    f"this {KEY_HEADER} came with another message before (to {earlier.stream.recipient_id}): "
                    "send the same message again with it, or a new message with a new key"
                )
            chunk, _ = stream_append_once(
                stream_id=earlier.stream_id, sender=sender, payload=payload, topic=topic, request_key=request_key
            )
            return earlier.stream, chunk, True
    stream = stream_open(sender=sender, recipient=recipient, topic=topic, actor=actor)
    chunk, _ = stream_append_once(
        stream_id=stream.id, sender=sender, payload=payload, topic=topic, actor=actor, request_key=request_key
    )
    return stream, chunk, False


def _sent_with(
    stream: Stream, sender: Agent | None, key: str, payload: dict[str, Any], topic: str | None
) -> Chunk | None:
    """The chunk ``sender`` appended to ``stream`` with ``key`` (None: none); KeyReused
    when it was another message."""
    earlier = Chunk.objects.filter(stream=stream, sender=sender, request_key=key).first()
    if earlier is not None and (earlier.payload != payload or topic not in (None, earlier.topic)):
        raise KeyReused(
            f"this {KEY_HEADER} came with another message before (sequence {earlier.sequence}): "
            "send the same message again with it, or a new message with a new key"
        )
    return earlier


@transaction.atomic
def stream_close(*, stream_id: str, sender: Agent | None, actor: str = "") -> Stream:
    """The sender's statement that the conversation is over. Closing twice is a no-op."""
    stream = Stream.objects.select_for_update().filter(id=stream_id).first()
    if stream is None:
        raise NotFoundError("No such stream.")
    if stream.sender_id != (sender.id if sender is not None else None):
        raise ForbiddenError("only the stream's sender may close it")
    if stream.closed_at is None:
        stream.closed_at = timezone.now()
        stream.save(update_fields=["closed_at"])
        audit(
            action=AuditAction.CLOSE,
            actor=_actor(actor, sender),
            agent_id=_ref(sender),
            stream_id=stream.id,
            detail={"lastSequence": stream.last_sequence},
        )
        # A request waits on its reply stream's close: wake the audience.
        wake_inboxes_on_commit(selectors.stream_audience(stream))
        if stream.reply_to:
            # An agent that asked and keeps its place (``await_reply``) resumes with it.
            reply_closed.send(sender=Stream, stream=stream)
    return stream


@transaction.atomic
def send_agent_message(
    *,
    sender: Agent,
    recipient: Agent,
    text: str,
    stream_id: str | None = None,
    topic: str | None = None,
    actor: str = "",
) -> Chunk:
    """One agent's message to another, on the bus (the ``agent_send_message`` tool).

    Without ``stream_id`` a new direct stream is opened. With it, the message goes on
    that stream when the sender opened it to this recipient (or is a member of that
    group); when the sender was its recipient, the message is a reply and goes on the
    open reply stream back to the original sender (opened if there is none).
    """
    if not isinstance(text, str) or not text.strip():
        raise BusError("text is required")
    payload = {"text": text}
    if stream_id is None:
        opened = stream_open(sender=sender, recipient=recipient, topic=topic, actor=actor)
        return stream_append(stream_id=opened.id, sender=sender, payload=payload, actor=actor)
    stream = Stream.objects.filter(id=stream_id).first()
    if stream is None:
        raise NotFoundError("No such stream.")
    participants = selectors.stream_participants(stream)
    if stream.is_group and {sender.id, recipient.id} <= participants:
        target = stream
    elif stream.sender_id == sender.id and stream.recipient_id == recipient.id:
        target = stream
    elif stream.recipient_id == sender.id and stream.sender_id == recipient.id:
        target = (
            Stream.objects.filter(reply_to=stream.id, sender=sender, recipient=recipient, closed_at__isnull=True)
            .order_by("created_at")
            .first()
        ) or stream_open(sender=sender, recipient=recipient, topic=stream.topic, reply_to=stream.id, actor=actor)
    else:
        raise NotFoundError("No such stream.")
    return stream_append(stream_id=target.id, sender=sender, payload=payload, actor=actor)


@transaction.atomic
def stream_reply(*, responder: Agent, stream_id: str, payload: dict[str, Any], actor: str = "") -> Chunk:
    """Answer a stream the responder received (the ``agent_reply`` tool).

    A direct stream is answered on a reply stream back to its sender (``reply_to`` =
    the stream), which is then closed: the close is what a ``request`` waits for. An
    open reply stream of the responder's is reused, so a reply begun with
    ``send_agent_message`` ends here. A group stream is answered on the group itself
    (nothing is closed: the group goes on).
    """
    stream = Stream.objects.filter(id=stream_id).first()
    if stream is None or responder.id not in selectors.stream_audience(stream):
        raise NotFoundError("No such stream to reply to.")
    if stream.is_group:
        return stream_append(stream_id=stream.id, sender=responder, payload=payload, actor=actor)
    if stream.sender is None and not _is_hub_chat(stream.id):
        raise BusError("the operator's records take no reply (a task's conversation is answered on the task)")
    target = _reply_stream(responder, stream, actor)
    chunk = stream_append(stream_id=target.id, sender=responder, payload=payload, actor=actor)
    stream_close(stream_id=target.id, sender=responder, actor=actor)
    return chunk


def _reply_stream(responder: Agent, stream: Stream, actor: str) -> Stream:
    """The responder's open reply stream to a direct stream's sender (none: a person's
    chat through the hub), or a new one."""
    return (
        Stream.objects.filter(reply_to=stream.id, sender=responder, recipient=stream.sender, closed_at__isnull=True)
        .order_by("created_at")
        .first()
    ) or stream_open(sender=responder, recipient=stream.sender, topic=stream.topic, reply_to=stream.id, actor=actor)


@transaction.atomic
def tell_waiting(*, responder: Agent, stream_id: str, text: str, approval_id: str, actor: str = "") -> Chunk | None:
    """An outside agent waiting for the responder's answer on ``stream_id`` hears why it
    is late: the answering run waits on a person's approval. Said on the reply stream
    the answer will close (left open, so the asker still waits for the answer), marked
    ``status: waiting_on_person`` with the approval's id. Only an outside asker is told:
    an agent the loop runs would spend a model run on the message, and its own wait for
    the reply has a deadline. Returns the message (None: nobody outside waits)."""
    stream = Stream.objects.select_related("sender").filter(id=stream_id).first()
    if stream is None or stream.sender is None or stream.sender.kind != Agent.Kind.EXTERNAL:
        return None  # (an agent the loop runs asked: two reads saved on each park)
    if not selectors.reply_expected(stream_id, responder.id):
        return None
    payload = {
        "text": text,
        "senderName": responder.name,
        "status": selectors.WAITING_ON_PERSON,
        "approvalId": approval_id,
    }
    return stream_append(
        stream_id=_reply_stream(responder, stream, actor).id, sender=responder, payload=payload, actor=actor
    )


@transaction.atomic
def reply_if_expected(*, responder: Agent, stream_id: str, text: str, actor: str = "") -> Chunk | None:
    """The loop's backstop for an agent message that waits for an answer (a request, a
    colleague's question): when the responder has not answered it yet, its final text
    is the answer. Returns the reply, or None when none was expected (or the text is
    empty)."""
    if not isinstance(text, str) or not text.strip() or not selectors.reply_expected(stream_id, responder.id):
        return None
    return stream_reply(
        responder=responder, stream_id=stream_id, payload={"text": text, "senderName": responder.name}, actor=actor
    )


@transaction.atomic
def group_chat_open(*, creator: Agent, members: Sequence[Agent], name: str, actor: str = "") -> Stream:
    """A named group chat: a group stream whose topic carries the name."""
    name = name.strip() if isinstance(name, str) else ""
    if not name:
        raise BusError("a group chat needs a name")
    check_label("name", name)
    topic = selectors.GROUP_TOPIC_PREFIX + name
    if len(topic) > MAX_TOPIC:
        raise BusError(
            f"a group chat's name may have at most {MAX_TOPIC - len(selectors.GROUP_TOPIC_PREFIX)} characters"
        )
    return stream_open(sender=creator, members=members, topic=topic, actor=actor)


# --------------------------------------------------------------------------- inbox


def _cas_attempts() -> Iterator[int]:
    """Yield until the deadline, backing off (jittered) from the second attempt on."""
    deadline = time.monotonic() + CAS_DEADLINE_SECONDS
    attempt = 0
    while attempt == 0 or time.monotonic() < deadline:
        if attempt:
            time.sleep(random.random() * min(0.05, 0.001 * 2**attempt))
        yield attempt
        attempt += 1


def _cas_cursor(agent_id: str, old: ConsumerCursor | None, position: int) -> bool:
    """Move the consumer cursor from ``old`` to ``position``; False if it moved meanwhile."""
    new = encode_cursor(agent_id, position)
    if old is None:
        try:
            with transaction.atomic():
                ConsumerCursor.objects.create(agent_id=agent_id, topic=INBOX_TOPIC, cursor=new, position=position)
            return True
        except IntegrityError:
            return False
    updated = ConsumerCursor.objects.filter(id=old.id, cursor=old.cursor).update(
        cursor=new, position=position, updated_at=timezone.now()
    )
    return updated == 1


def inbox_drain(
    *, agent_id: str, peek: bool = False, limit: int = selectors.DEFAULT_LIMIT, actor: str = ""
) -> dict[str, Any]:
    """Take what is waiting after the consumer cursor and advance it by compare-and-set
    (``peek``: look without consuming). Answers at once, whether or not anything was
    waiting. Two drains racing never hand out the same message twice."""
    for _ in _cas_attempts():
        row = ConsumerCursor.objects.filter(agent_id=agent_id, topic=INBOX_TOPIC).first()
        start = row.position if row is not None else 0
        result = selectors.inbox_read_from(agent_id, start, limit=limit)
        data = {"messages": result["messages"], "next_cursor": result["next_cursor"]}
        if peek:
            audit(action=AuditAction.PEEK, actor=actor, agent_id=agent_id, detail={"count": len(data["messages"])})
            return data
        with transaction.atomic():
            if result["position"] != start and not _cas_cursor(agent_id, row, result["position"]):
                continue
            audit(
                action=AuditAction.DRAIN,
                actor=actor,
                agent_id=agent_id,
                detail={"count": len(data["messages"]), "from": start, "to": result["position"]},
            )
        return data
    raise ConflictError("the inbox was being drained concurrently; try again")


def inbox_ack(*, agent_id: str, cursor: object, actor: str = "") -> bool:
    """Advance the consumer cursor to a cursor the agent passed to ``wait`` (it has
    seen everything before it). Never moves it back; an unusable cursor is ignored."""
    position = decode_cursor(cursor, agent_id=agent_id, clock=selectors.current_clock())
    if position is None:
        return False
    for _ in _cas_attempts():
        row = ConsumerCursor.objects.filter(agent_id=agent_id, topic=INBOX_TOPIC).first()
        if row is not None and row.position >= position:
            return False
        with transaction.atomic():
            if _cas_cursor(agent_id, row, position):
                audit(
                    action=AuditAction.ACK,
                    actor=actor,
                    agent_id=agent_id,
                    detail={"from": row.position if row else 0, "to": position},
                )
                return True
    return False
