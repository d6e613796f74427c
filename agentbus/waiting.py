"""The blocking halves of the bus, as coroutines: ``inbox_wait`` and ``stream_request``.

They hold no thread while they sleep: they wait on the inbox's wake-ups
(``agentbus.wakeup``) and re-read the database when woken. Neither does a read of its
own while nothing happens: the event loop's one backstop read (``wakeup``) wakes a
parked ``inbox_wait`` when a message arrived whose wake-up was lost, and a parked
``stream_request`` when its reply was closed and the close's wake-up was lost. A
``stream_request`` re-reads its reply only on a bare wake-up (a close, a reconnect, the
backstop): a message to the requester's inbox cannot complete it, only a close can.

One hop: everything a wait does before it parks (the ack, the cursor, the first read)
is one synchronous step (``inbox_start``), which a door runs together with its own
authentication in a single ``sync_to_async``; a wake-up that carries the message
answers with no hop at all.

A woken ``inbox_wait`` skips the database when the wake-ups alone prove what it would
read: inbox positions are handed out in commit order without holes (see ``models``),
so when a wake-up carries the message at the position right after the one the waiter
has read up to, nothing else can lie between them, and that message is the answer.
Anything else (a gap, a bare wake-up, a message too large to carry) reads the rows
after the position, in one round.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, transaction

from markus.agents.models import Agent
from markus.core.db import database_unreachable, on_a_live_connection, read_while_waiting

from . import selectors, services
from .cursors import encode_cursor
from .models import AuditAction
from .wakeup import InboxWaiter, Wake

logger = logging.getLogger(__name__)

MAX_WAIT_SECONDS = 3600.0


def inbox_start(
    *,
    agent_id: str,
    after_cursor: object = None,
    limit: int = selectors.DEFAULT_LIMIT,
    ack: bool = False,
    actor: str = "",
) -> dict[str, Any]:
    """What a wait does before it parks, synchronously: the ack (``ack``: the agent
    itself waiting moves its consumer cursor up to ``after_cursor``), the starting
    position (a cursor that must be ignored falls back to the consumer cursor) and the
    first read (``selectors.inbox_read_from``)."""
    if ack and after_cursor:
        services.inbox_ack(agent_id=agent_id, cursor=after_cursor, actor=actor)
    position = selectors.resolve_cursor(agent_id, after_cursor)
    return selectors.inbox_read_from(agent_id, position, limit=limit)


def answer(result: dict[str, Any]) -> dict[str, Any]:
    return {"messages": result["messages"], "next_cursor": result["next_cursor"], "timed_out": not result["messages"]}


def deadline_after(timeout: float) -> float:
    return asyncio.get_running_loop().time() + max(0.0, min(timeout, MAX_WAIT_SECONDS))


async def inbox_park(
    waiter: InboxWaiter, first: dict[str, Any], *, deadline: float, limit: int = selectors.DEFAULT_LIMIT
) -> dict[str, Any]:
    """Wait on ``waiter`` (entered before ``first`` was read) from ``first``, the read
    ``inbox_start`` answered, until a message or the ``deadline`` (loop time). Answers
    the last read as ``inbox_read_from`` does (``answer`` makes it the wait's answer);
    parking again from it resumes where it stopped."""
    loop = asyncio.get_running_loop()
    result = first
    while True:
        remaining = deadline - loop.time()
        if result["messages"] or remaining <= 0:
            return result
        position = result["position"]
        wakes = await waiter.wait(remaining, position=position)
        carried = messages_carried(waiter.agent_id, position, wakes, limit)
        if carried is None:  # (its connection may have died while it was parked)
            read = selectors.inbox_read_from
            result = await sync_to_async(on_a_live_connection)(read, waiter.agent_id, position, limit=limit)
        else:
            result = carried


async def inbox_wait(
    *,
    agent_id: str,
    after_cursor: object = None,
    timeout: float = 30.0,
    limit: int = selectors.DEFAULT_LIMIT,
    ack: bool = False,
    actor: str = "",
) -> dict[str, Any]:
    """Block until the inbox has a message after the cursor or ``timeout`` passes.

    Answers ``{messages, next_cursor, timed_out}``; ``next_cursor`` is there also on a
    timeout, so a restarted watcher resumes exactly where this one stopped. ``ack``
    (the agent itself waiting) moves the consumer cursor up to ``after_cursor``, so
    ``pending`` and ``drain`` agree with a watcher that only uses ``wait``.
    """
    deadline = deadline_after(timeout)
    start = partial(inbox_start, agent_id=agent_id, after_cursor=after_cursor, limit=limit, ack=ack, actor=actor)
    if timeout <= 0:
        return answer(await sync_to_async(start)())
    async with InboxWaiter(agent_id) as waiter:
        return answer(await inbox_park(waiter, await sync_to_async(start)(), deadline=deadline, limit=limit))


def messages_carried(agent_id: str, position: int, wakes: list[Wake], limit: int) -> dict[str, Any] | None:
    """The messages the wake-ups carry at ``position + 1``, ``+ 2``... without a gap, as
    ``inbox_read_from`` would answer them; None when the database must be read."""
    messages: list[dict[str, Any]] = []
    by_position = {w.position: w.message for w in wakes if w.position is not None}
    while len(messages) < limit:
        message = by_position.get(position + 1)
        if message is None:
            break
        position += 1
        messages.append(message)
    if not messages:
        return None
    return {"messages": messages, "next_cursor": encode_cursor(agent_id, position), "position": position}


def _request_start(
    *, sender: Agent, recipient: Agent, payload: dict[str, Any], topic: str | None, actor: str, request_key: str | None
) -> tuple[str, dict[str, Any], bool]:
    """The request stored: its stream, its message, and whether it was sent before with
    ``request_key`` (then it waits for that request's reply; nothing is written)."""
    with transaction.atomic():
        stream, chunk, replayed = services.stream_send_once(
            sender=sender, recipient=recipient, payload=payload, topic=topic, actor=actor, request_key=request_key
        )
        if not replayed:
            services.audit(
                action=AuditAction.REQUEST,
                actor=actor or f"agent:{sender.id}",
                agent_id=sender.id,
                stream_id=stream.id,
                detail={"recipient": recipient.id},
            )
    return stream.id, selectors.chunk_data(chunk), replayed


def _request_end(*, stream_id: str, sender: Agent, actor: str, state: dict[str, Any]) -> dict[str, Any]:
    """The request's last step, one hop: the reply as it stands (read again unless the
    last read saw it complete: chunks may have come since) and the request stream's close.
    The request is stored: with the database down it answers what it last read and leaves
    the stream open (said in the log), never a 503 that asks for the request again."""
    if not state["done"]:  # (the first statement since it parked)
        state = read_while_waiting(state, selectors.reply_state, stream_id, sender.id)
    try:
        services.stream_close(stream_id=stream_id, sender=sender, actor=actor)
    except (OperationalError, InterfaceError) as exc:
        if not database_unreachable(exc):
            raise
        logger.warning("bus request %s answered, its stream left open: the database cannot be reached", stream_id)
    return state


async def stream_request(
    *,
    sender: Agent,
    recipient: Agent,
    payload: dict[str, Any],
    topic: str | None = None,
    timeout: float = 30.0,
    actor: str = "",
    request_key: str | None = None,
) -> dict[str, Any]:
    """Open a stream to ``recipient``, append ``payload``, wait for the reply and its
    close, then close the request stream. Sent again with its ``request_key``, it waits
    for the first request's reply (``replayed: true``), asking nothing twice.

    The reply is a stream the responder opens back to the sender with ``replyTo`` set
    to the request's stream; it is complete when the responder closes it. On timeout
    the answer carries what arrived so far and ``timed_out: true``.

    While it waits it reads nothing: the close's wake-up (a bare one on the requester's
    inbox) makes it read the reply; a wake-up that carries a position is an append,
    which cannot complete a reply, and is passed over. The backstop (``wakeup``) covers
    a lost close.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, min(timeout, MAX_WAIT_SECONDS))
    stream_id, request, replayed = await sync_to_async(_request_start)(
        sender=sender, recipient=recipient, payload=payload, topic=topic, actor=actor, request_key=request_key
    )
    async with InboxWaiter(sender.id) as waiter:  # registered before the first read: never lost
        # Reads once the request is stored: the database down reads as "nothing new".
        nothing: dict[str, Any] = {"reply": [], "replyStreamId": None, "done": False}
        state = await sync_to_async(read_while_waiting)(nothing, selectors.reply_state, stream_id, sender.id)
        while not state["done"]:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wakes = await waiter.wait(remaining, reply_to=stream_id)
            if any(wake.position is None for wake in wakes):
                state = await sync_to_async(read_while_waiting)(state, selectors.reply_state, stream_id, sender.id)
    state = await sync_to_async(_request_end)(stream_id=stream_id, sender=sender, actor=actor, state=state)
    return {
        "streamId": stream_id,
        "request": request,
        "replyStreamId": state["replyStreamId"],
        "reply": state["reply"],
        "timed_out": not state["done"],
        "replayed": replayed,
    }
