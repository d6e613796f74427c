"""Reads: an agent's inbox, pending counts, a stream's events, who may see a stream.

The inbox is every chunk on a stream the agent can see (direct recipient, or member
of a group stream), never the agent's own, ordered by inbox position (see
``models``). Reading the clock *before* the chunks makes an empty answer safe to
advance to the clock: every position up to it had committed before the read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from markus.agents.models import Agent
from markus.core.db import count_subquery

from .cursors import decode_cursor, encode_cursor
from .models import INBOX_TOPIC, OPERATOR_NAME, Chunk, ConsumerCursor, InboxClock, Stream, StreamMember

DEFAULT_LIMIT = 100
MAX_LIMIT = 500
# What ``chunk_data`` reads of a chunk's sender: loaded with a list of chunks.
CHUNK_SENDER = "sender__team"
# A named group chat's topic is this prefix and its name (``services.group_chat_open``).
GROUP_TOPIC_PREFIX = "group:"
# A reply's message that is not the answer: it tells the asker the answer waits on a
# person (``services.tell_waiting``); its payload's ``status``.
WAITING_ON_PERSON = "waiting_on_person"


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def chunk_data(chunk: Chunk) -> dict[str, Any]:
    """One message, saying who sent it (name and team, so a reader such as the Claude
    Code hook need not look the sender up). Lists load ``CHUNK_SENDER`` with the chunks."""
    sender = chunk.sender
    team = sender.team if sender is not None else None
    return {
        "streamId": chunk.stream_id,
        "sequence": chunk.sequence,
        "sender": chunk.sender_ref,
        "senderName": sender.name if sender is not None else OPERATOR_NAME,
        "senderTeam": {"id": team.id, "name": team.name} if team is not None else None,
        "topic": chunk.topic,
        "payload": chunk.payload,
        "createdAt": iso(chunk.created_at),
    }


def stream_data(stream: Stream) -> dict[str, Any]:
    members = sorted(StreamMember.objects.filter(stream=stream).values_list("agent_id", flat=True))
    return {
        "streamId": stream.id,
        "sender": stream.sender_ref,
        "recipient": stream.recipient_id,
        "members": members,
        "isGroup": stream.is_group,
        "topic": stream.topic,
        "replyTo": stream.reply_to,
        "lastSequence": stream.last_sequence,
        "closed": stream.closed_at is not None,
        "closedAt": iso(stream.closed_at),
        "createdAt": iso(stream.created_at),
    }


def current_clock() -> int:
    value = InboxClock.objects.filter(id=1).values_list("value", flat=True).first()
    return int(value or 0)


def consumer_position(agent_id: str) -> int:
    value = (
        ConsumerCursor.objects.filter(agent_id=agent_id, topic=INBOX_TOPIC).values_list("position", flat=True).first()
    )
    return int(value or 0)


def inbox_chunks(agent_id: str) -> QuerySet[Chunk]:
    """Everything addressed to the agent, never its own messages."""
    groups = StreamMember.objects.filter(agent_id=agent_id).values("stream_id")
    return Chunk.objects.filter(Q(recipient_id=agent_id) | Q(stream_id__in=groups)).exclude(sender_id=agent_id)


def inbox_read_from(agent_id: str, position: int, *, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """Messages after ``position`` and the cursor to pass next time."""
    clock = current_clock()
    chunks = list(
        inbox_chunks(agent_id).filter(position__gt=position).select_related(CHUNK_SENDER).order_by("position")[:limit]
    )
    if len(chunks) == limit:
        next_position = chunks[-1].position
    else:
        # All of this agent's messages up to the clock were read: skip the others'.
        next_position = max([position, clock] + [c.position for c in chunks])
    return {
        "messages": [chunk_data(c) for c in chunks],
        "next_cursor": encode_cursor(agent_id, next_position),
        "position": next_position,
    }


def inbox_news(positions: dict[str, int]) -> tuple[int, set[str]]:
    """The backstop's one read for every parked wait of a process: the inbox clock, and
    which of these agents have a message after their position (``{agent: position}``).
    Every other agent has nothing up to the clock. An idle server pays one statement
    (the clock) per call, whatever the number of waits; when the clock has moved, one
    more reads the rows that moved it for these agents (direct and group messages)."""
    clock = current_clock()
    behind = {agent: position for agent, position in positions.items() if position < clock}
    if not behind:
        return clock, set()
    low = min(behind.values())
    window = Chunk.objects.filter(position__gt=low, position__lte=clock)
    direct = window.filter(recipient_id__in=list(behind)).values_list("recipient_id", "sender_id", "position")
    grouped = window.filter(stream__streammember__agent_id__in=list(behind)).values_list(
        "stream__streammember__agent_id", "sender_id", "position"
    )
    news = {
        agent
        for agent, sender, position in direct.union(grouped, all=True)
        if sender != agent and position > behind[agent]
    }
    return clock, news


def resolve_cursor(agent_id: str, cursor: object) -> int:
    """The position to read after: the cursor's, or, when it is absent or must be
    ignored, the server-side consumer cursor (0 for an inbox never drained)."""
    position = decode_cursor(cursor, agent_id=agent_id, clock=current_clock())
    return consumer_position(agent_id) if position is None else position


def inbox_read(agent_id: str, *, after_cursor: object = None, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    return inbox_read_from(agent_id, resolve_cursor(agent_id, after_cursor), limit=limit)


def pending_count(agent_id: str) -> int:
    """Messages after the consumer cursor (what ``drain`` would take)."""
    return inbox_chunks(agent_id).filter(position__gt=consumer_position(agent_id)).count()


def inbox_state(agent_id: str) -> dict[str, Any]:
    """An inbox as its owner's mind view shows it: messages after the consumer cursor,
    the cursor's position and when it last moved (a drain, a ``wait`` acknowledged;
    None: never read)."""
    row = ConsumerCursor.objects.filter(agent_id=agent_id, topic=INBOX_TOPIC).first()
    return {
        "pending": pending_count(agent_id),
        "position": row.position if row is not None else 0,
        "lastReadAt": row.updated_at if row is not None else None,
    }


def pending_inbox_expression() -> Coalesce:
    """What ``pending_count`` counts, as a per-row annotation on Agent querysets (one
    query for a whole list instead of two per agent)."""
    agent = OuterRef(OuterRef("pk"))  # two levels down: inside the chunks subquery
    groups = StreamMember.objects.filter(agent_id=agent).values("stream_id")
    cursor = ConsumerCursor.objects.filter(agent_id=agent, topic=INBOX_TOPIC).values("position")[:1]
    chunks = (
        Chunk.objects.filter(Q(recipient_id=OuterRef("pk")) | Q(stream_id__in=groups))
        .exclude(sender_id=OuterRef("pk"))
        .filter(position__gt=Coalesce(Subquery(cursor), 0))
    )
    return count_subquery(chunks)


def pending_counts(agent_ids: list[str]) -> dict[str, int]:
    rows = Agent.objects.filter(id__in=agent_ids).annotate(pending=pending_inbox_expression())
    counts = dict(rows.values_list("id", "pending"))
    return {agent_id: counts.get(agent_id, 0) for agent_id in agent_ids}


def stream_audience(stream: Stream) -> list[str]:
    """Whose inboxes a chunk on this stream reaches (before excluding its sender)."""
    if stream.is_group:
        return sorted(StreamMember.objects.filter(stream=stream).values_list("agent_id", flat=True))
    return [stream.recipient_id] if stream.recipient_id else []


def stream_participants(stream: Stream) -> set[str]:
    ids = set(stream_audience(stream))
    if stream.sender_id:
        ids.add(stream.sender_id)
    return ids


def stream_events(stream: Stream, *, after: int = 0, limit: int = MAX_LIMIT) -> list[dict[str, Any]]:
    chunks = stream.chunks.filter(sequence__gt=after).select_related(CHUNK_SENDER).order_by("sequence")[:limit]
    return [chunk_data(c) for c in chunks]


def reply_state(stream_id: str, requester_id: str) -> dict[str, Any]:
    """What a request on ``stream_id`` has received: chunks on reply streams, and
    whether one of them was closed (the reply is complete)."""
    replies = Stream.objects.filter(reply_to=stream_id).exclude(sender_id=requester_id)
    chunks = Chunk.objects.filter(stream__in=replies).select_related(CHUNK_SENDER).order_by("position")
    closed = replies.filter(closed_at__isnull=False).order_by("closed_at").first()
    return {
        "reply": [chunk_data(c) for c in chunks],
        "replyStreamId": closed.id if closed else (replies.order_by("created_at").values_list("id", flat=True).first()),
        "done": closed is not None,
    }


def is_answer(payload: object) -> bool:
    """Is this reply message (a chunk's payload) part of the answer, not a note that it
    waits (``WAITING_ON_PERSON``)?"""
    return not (isinstance(payload, dict) and payload.get("status") == WAITING_ON_PERSON)


def replies_closed(requests: dict[str, str]) -> set[str]:
    """The backstop's one read for every parked request of a process: which of these
    request streams (``{stream: requester}``) have a closed reply from someone other
    than their requester (``reply_state``'s ``done``). One statement, whatever the
    number of requests."""
    closed = Stream.objects.filter(reply_to__in=list(requests), closed_at__isnull=False).values_list(
        "reply_to", "sender_id"
    )
    return {stream for stream, sender in closed if stream is not None and sender != requests.get(stream)}


def reply_expected(stream_id: str, agent_id: str) -> bool:
    """Does the stream wait for ``agent_id``'s answer? A direct stream from another
    agent to it that is not itself an answer, and that it has not answered yet (a
    closed reply stream of its own). A group message, a reply, the operator's records
    and anything already answered expect nothing, so two agents never answer each
    other's answers for ever."""
    stream = Stream.objects.filter(id=stream_id).first()
    if stream is None or stream.is_group or stream.reply_to or stream.sender_id is None:
        return False
    if stream.recipient_id != agent_id:
        return False
    return not Stream.objects.filter(reply_to=stream.id, sender_id=agent_id, closed_at__isnull=False).exists()


def group_name(stream: Stream) -> str:
    topic = stream.topic or ""
    return topic[len(GROUP_TOPIC_PREFIX) :] if topic.startswith(GROUP_TOPIC_PREFIX) else topic


def group_chats_of(agent_id: str) -> QuerySet[Stream]:
    """The group streams the agent is a member of, newest first."""
    groups = StreamMember.objects.filter(agent_id=agent_id).values("stream_id")
    return Stream.objects.filter(id__in=groups, is_group=True).order_by("-created_at", "-id")
