"""Ask a colleague and keep your place (upstream's ``callback_result``).

``agent_send_message(..., await_reply=true)`` leaves an effect (``AWAITING``); the run
ends ``awaiting_reply`` and the item is parked (``park``): deferred and not due, like an
item waiting for an approval, so no worker waits. Two wakers, each one idempotent:

* **the reply's close**: when the colleague's reply stream (``reply_to`` = the asked
  stream) closes, ``on_reply_closed`` records the reply as a ``callback_result`` item
  merged into the asking item, puts the reply's own agent messages in with it, writes
  the answer as the tool's result in the item's saved session and re-queues it: the run
  goes on in its own session with the answer;
* **the timeout**: ``reply_waits_timed_out`` (a sweep hook, every beat, and recovery)
  re-queues an item whose wait ran out with a timeout note (and what was said so far) as
  the tool's result. A reply that comes later is an ordinary agent message.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agentbus.models import Chunk, Stream
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status

from .lease import Fence
from .models import LLMSession
from .services import wake_on_commit
from .session import session_id

log = logging.getLogger(__name__)

# The effect ``agent_send_message`` leaves when it waits: {streamId, until, to, minutes}.
AWAITING = "awaiting_reply"
WAITING = "waiting_for_reply"  # the tool's result while it waits
DEFAULT_TIMEOUT_MINUTES = 30
MAX_TIMEOUT_MINUTES = 24 * 60


def deadline(minutes: int, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(minutes=minutes)


def park(tx: Fence, item: MailboxItem, effect: dict[str, Any], *, batch: list[MailboxItem] | None = None) -> None:
    """The run asked and waits: the item (and its batch) deferred until the reply.
    Answered already (the colleague was quicker than this settle)? Then it resumes now."""
    tx.check()
    stream_id = str(effect["streamId"])
    until = parse_datetime(str(effect["until"])) or deadline(DEFAULT_TIMEOUT_MINUTES)
    asked_at = parse_datetime(str(effect.get("askedAt") or "")) or timezone.now()
    about = {
        "replyFrom": effect.get("to") or {},
        "replyMinutes": effect.get("minutes"),
        "replyAskedAt": asked_at.isoformat(),
    }
    for one in [item, *(batch or [])]:
        lifecycle.park_for_reply(one, epoch=tx.epoch, stream_id=stream_id, until=until, about=about)
    closed = (
        Stream.objects.filter(reply_to=stream_id, recipient_id=item.agent_id, closed_at__gte=asked_at)
        .order_by("closed_at")
        .first()
    )
    if closed is not None:
        _replied(closed)


def on_reply_closed(sender: type[Stream], stream: Stream, **kwargs: Any) -> None:
    """The bus's ``reply_closed``: inside the close's transaction."""
    if stream.reply_to and stream.recipient_id and stream.sender_id:
        _replied(stream)


def _replied(reply: Stream) -> None:
    assert reply.reply_to and reply.recipient_id
    waiting = lifecycle.parked_for_reply(reply.recipient_id, reply.reply_to)
    if not waiting:
        return  # nobody waits (no await_reply, or its time ran out): an ordinary agent message
    lead = waiting[0]
    text = _said(Stream.objects.filter(id=reply.id), since=_asked_at(lead))
    who = {"id": reply.sender_id, "name": reply.sender.name if reply.sender else reply.sender_id}
    first_line = (text.strip().splitlines() or [""])[0][:120]
    lifecycle.insert_delivered(
        lead,
        source_type=MailboxType.CALLBACK_RESULT,
        payload={
            "summary": f"Reply from {who['name']}: {first_line}",
            "content": text,
            "extra": {"channelKey": reply.id, "replyTo": reply.reply_to, "awaitedBy": lead.id},
        },
        metadata={"senderId": who["id"], "senderName": who["name"], "senderRole": "agent"},
    )
    # The reply's own agent messages (enqueued with each chunk) went in with it.
    mine = MailboxItem.objects.filter(
        agent_id=lead.agent_id, source_type=MailboxType.A2A_MESSAGE, status=Status.QUEUED, marks__streamId=reply.id
    ).values_list("id", flat=True)
    lifecycle.deliver_queued(list(mine), lead)
    result = {"status": "replied", "from": who, "streamId": reply.reply_to, "replyStreamId": reply.id, "reply": text}
    _resume(waiting, reply.reply_to, result)


def reply_waits_timed_out(agent_id: str | None = None, *, now: datetime | None = None) -> list[str]:
    """Re-queue the items whose wait for a reply ran out, with a timeout note as the
    tool's result (the sweep's hook, and recovery's for one agent). Returns their ids."""
    now = now or timezone.now()
    due = MailboxItem.objects.filter(status=Status.DEFERRED, deferred_until__lte=now).filter(
        lifecycle.waiting_for_reply()
    )
    if agent_id is not None:
        due = due.filter(agent_id=agent_id)
    resumed: list[str] = []
    for found_agent, stream_id in due.values_list("agent_id", "marks__replyStream").distinct()[:200]:
        with transaction.atomic():
            waiting = [
                i
                for i in lifecycle.parked_for_reply(found_agent, stream_id)
                if i.deferred_until and i.deferred_until <= now
            ]
            if not waiting:
                continue  # answered meanwhile
            asked = waiting[0].marks.get("replyFrom") or {}
            name = asked.get("name") or asked.get("id") or "your colleague"
            minutes = waiting[0].marks.get("replyMinutes")
            span = f" within {minutes} minutes" if minutes else ""
            so_far = _said(
                Stream.objects.filter(reply_to=stream_id, recipient_id=found_agent), since=_asked_at(waiting[0])
            )
            note = (
                f"No reply from {name}{span}: the wait is over. Go on without the answer (or ask again); "
                "a reply that comes later arrives in your mailbox as an agent message."
            )
            result = {"status": "timed_out", "streamId": stream_id, "note": note}
            if so_far:
                result["partialReply"] = so_far
            _resume(waiting, stream_id, result)
            resumed += [i.id for i in waiting]
    if resumed:
        log.info("attention: waits for a reply timed out: %s", resumed)
    return resumed


def _asked_at(item: MailboxItem) -> datetime | None:
    return parse_datetime(str(item.marks.get("replyAskedAt") or ""))


def _said(streams: Any, *, since: datetime | None) -> str:
    """What was said on ``streams`` since the question (an earlier answer is not this one's)."""
    chunks = Chunk.objects.filter(stream__in=streams).order_by("position")
    if since is not None:
        chunks = chunks.filter(created_at__gte=since)
    texts = []
    for chunk in chunks:
        payload = chunk.payload if isinstance(chunk.payload, dict) else {}
        value = payload.get("text") or payload.get("content") or payload.get("message")
        texts.append(value if isinstance(value, str) else json.dumps(payload, ensure_ascii=False, sort_keys=True))
    return "\n\n".join(texts)


def _resume(waiting: list[MailboxItem], stream_id: str, result: dict[str, Any]) -> None:
    """The tool's result in the saved session, then the items re-queued (on commit the
    agent is woken). Must be called holding their rows locked (``parked_for_reply``)."""
    answer = json.dumps(result, ensure_ascii=False)
    for item in waiting:
        session = LLMSession.objects.select_for_update().filter(id=session_id(item)).first()
        if session is not None:
            session.messages = [_answered(m, stream_id, answer) for m in session.messages]
            session.save(update_fields=["messages"])
        lifecycle.unpark_reply(item)
    wake_on_commit(waiting[0].agent_id)


def _answered(message: dict[str, Any], stream_id: str, answer: str) -> dict[str, Any]:
    if message.get("role") != "tool":
        return message
    try:
        content = json.loads(message.get("content") or "")
    except (TypeError, ValueError):
        return message
    if isinstance(content, dict) and content.get("status") == WAITING and content.get("streamId") == stream_id:
        return {**message, "content": answer}
    return message
