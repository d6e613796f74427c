"""The MCP door: the AgentBus inbox, the bus and the agent's tasks as tools of an MCP
server, for coding agents and agent frameworks that load their tools from MCP.

Served over Streamable HTTP at ``/mcp/`` (mounted in the ASGI application: ``asgi_app``)
and over stdio by ``manage.py mcp``. Over HTTP the caller is whoever its token names
(``Authorization: Bearer <agent token>``, or a user's ``Token <key>``): no token, no tool.
The tools have the semantics, limits and errors of the REST API and the CLI, and decide
who may do what through the one permission table (``markus.agents.permissions``) and the
bus's access rules (``agentbus.access``), as every other door:

- ``inbox_wait``: a long poll that holds no thread (an awaited wait, capped per caller
  like every wait), sending progress notifications while it waits;
- ``inbox_pending``, ``inbox_drain``: an agent reads and consumes only its own inbox; a
  user who may see an agent may read it (``agent_id``) and peek, never consume;
- ``bus_send``, ``bus_request``: as the calling agent (a user: ``sender``, an agent they
  control), to the agents it may address;
- ``bus_reply``: answer a stream addressed to the agent (``services.stream_reply``, as
  the loop's ``agent_reply``): a request's asker gets the answer, a person's chat
  (``attention.outside``) shows it;
- ``agent_list_colleagues``, ``task_list``, ``task_get``, ``task_comment``,
  ``task_submit_review``, ``task_transition``, ``task_review``: the tasks the caller may
  see; another's task answers like a missing one; only the task's reviewer reviews it.

Bounded: every string of every tool's arguments is checked once, as the REST API
checks a body (``markus.core.input.check_data``: a NUL or a lone surrogate is a tool
error naming the argument); nothing is ever pushed outside a call, so there is no
standing stream: ``GET /mcp/`` answers 405 (the spec lets a server) and
``subscriptions/listen`` (2026-07-28) is not served. What waits (``inbox_wait``,
``bus_request``) is a wait, capped like every other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.db import close_old_connections, transaction
from django.http import Http404
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework.exceptions import APIException

from mailbox import idempotency
from markus.agents import permissions
from markus.agents.auth import Caller, caller_for_token, caller_ref, visible_agents, waiter_for
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.db import retry_later
from markus.core.errors import MarkusError
from markus.core.input import UnsafeInput, check_data
from markus.core.waits import WAITS, Waiter
from markus.work import review
from markus.work import selectors as work
from markus.work import services as work_services
from markus.work.models import TaskState

from . import access, selectors, services
from .waiting import MAX_WAIT_SECONDS, answer, deadline_after, inbox_park, inbox_start, stream_request
from .wakeup import InboxWaiter

# How often a waiting ``inbox_wait`` tells the client it is still waiting, and what it says.
PROGRESS_SECONDS = 10.0
WAITING = "waiting for a message"
# What a text message's payload is, as the CLI and the hooks send it.
TEXT_KEY = "text"
INSTRUCTIONS = (
    "Markus: your AgentBus inbox and your tasks. Wait on your inbox with inbox_wait (it "
    "returns next_cursor: pass it back as after_cursor), talk to colleagues with bus_send "
    "and bus_request, answer what is addressed to you (a request, a person's chat) with bus_reply, "
    "work your tasks with task_get, task_comment and task_submit_review, and review with task_review."
)
# The only method of /mcp/: every exchange is a POST, nothing is pushed outside one.
ALLOWED_METHODS = "POST"

# Who calls, from the request: resolves a token, or is fixed (the stdio server's agent).
Identify = Callable[[Context], Awaitable[Caller]]
# Where the door leaves the caller it resolved in the request's ASGI scope, for the tool
# the request calls: a token is looked up once per request.
SCOPE_CALLER = "markus.caller"


def caller_for_authorization(header: str | None) -> Caller | None:
    """The caller an ``Authorization`` header names: ``Bearer <agent token>`` (or a
    user's token as bearer), ``Token <user token>``; None for no or a bad token."""
    scheme, _, raw = (header or "").strip().partition(" ")
    raw = raw.strip()
    if not raw or scheme.lower() not in ("bearer", "token"):
        return None
    return caller_for_token(raw, agents=scheme.lower() == "bearer")


def _caller_of(header: str | None) -> Caller | None:
    """``caller_for_authorization`` on a live connection. The door runs outside Django's
    request cycle, so it closes a connection that failed or grew old as a request's start
    would (``close_old_connections``): after the database restarted, the door's thread
    would otherwise keep its dead connection for good. In the same hop as the lookup."""
    close_old_connections()
    return caller_for_authorization(header)


async def identify_by_token(ctx: Context) -> Caller:
    """The caller the door resolved for this request (``McpHttpApp``), else its token's."""
    scope = getattr(ctx.request_context.request, "scope", None) or {}
    caller = scope.get(SCOPE_CALLER)
    if caller is None:
        headers = ctx.headers or {}
        caller = await sync_to_async(_caller_of)(headers.get("authorization"))
    if caller is None:
        raise ToolError("no valid token: send Authorization: Bearer <agent token> (or Token <user token>)")
    return caller


def _text(exc: BaseException) -> str:
    if isinstance(exc, APIException):
        detail = exc.detail
        return str(detail.get("detail", detail) if isinstance(detail, dict) else detail)
    if isinstance(exc, Http404):
        return str(exc) or "not found"
    return str(exc)


async def _run(fn: Callable[[], Any]) -> Any:
    """A synchronous service call, its refusals as tool errors the client reads."""
    try:
        return await sync_to_async(fn)()
    except (MarkusError, APIException, Http404, PermissionDenied) as exc:
        raise ToolError(_text(exc)) from None
    except Exception as exc:
        later = retry_later(exc)  # the database cannot serve it now: said, not its raw error
        if later is None:
            raise
        raise ToolError(later.message) from None


def _payload(text: str | None, payload: dict[str, Any] | None) -> dict[str, Any]:
    if (text is None) == (payload is None):
        raise ToolError("send text or payload (one of them)")
    if payload is not None:
        if not isinstance(payload, dict):
            raise ToolError("payload must be a JSON object")
        return payload
    return {TEXT_KEY: text}


def _key(raw: str | None) -> str | None:
    """A tool call's ``idempotency_key``, by the doors' one rule."""
    try:
        return idempotency.checked_key(raw, "idempotency_key")
    except MarkusError as exc:
        raise ToolError(str(exc)) from None


def _inbox_agent(caller: Caller, agent_id: str | None, operation: str) -> Agent:
    """The inbox a tool reads: the calling agent's own; a user names one they may see."""
    if agent_id is None:
        if caller.auth is None:
            raise ToolError("agent_id is required with a user's token (an agent's token reads its own inbox)")
        agent_id = caller.auth.id
    return permissions.require(caller, operation, agent_id)


async def wait_for_messages(
    caller: Caller,
    timeout_seconds: float,
    after_cursor: str | None,
    agent_id: str | None,
    progress: Callable[[float], Awaitable[None]],
) -> dict[str, Any]:
    """``inbox_wait``, for the SDK's tool and the door's own path (``McpHttpApp``): one
    thread hop for a call that answers at once; a call that waits takes its slot,
    registers its wake-up (only once it is known to be allowed: a refused caller
    registers nothing) and reads again from the first read's position before it parks
    (a second hop); none after a wake-up that carries the message, and no task of its
    own while it waits (``progress`` is awaited every PROGRESS_SECONDS)."""
    if not 0 <= timeout_seconds <= MAX_WAIT_SECONDS:
        raise ToolError(f"timeout_seconds must be between 0 and {MAX_WAIT_SECONDS:g}")
    loop = asyncio.get_running_loop()
    deadline = deadline_after(timeout_seconds)

    def start() -> tuple[str, Waiter, dict[str, Any]]:  # one thread hop: the target, the ack, the cursor, the read
        target, waiter = _inbox_agent(caller, agent_id, "agents_agentbus_inbox"), waiter_for(caller)
        ack = caller.auth is not None
        first = inbox_start(agent_id=target.id, after_cursor=after_cursor, ack=ack, actor=waiter.caller)
        return target.id, waiter, first

    inbox_id, waiter, result = await _run(start)
    if result["messages"] or timeout_seconds <= 0:
        return answer(result)
    async with contextlib.AsyncExitStack() as stack:
        try:
            stack.enter_context(WAITS.claim(waiter))
        except APIException as exc:  # too many waits of this caller: it says how many and when to retry
            raise ToolError(_text(exc)) from None
        inbox = await stack.enter_async_context(InboxWaiter(inbox_id))  # before the read it waits from
        position = result["position"]
        result = await _run(lambda: selectors.inbox_read_from(inbox_id, position))
        waited = 0.0
        while True:
            result = await inbox_park(inbox, result, deadline=min(deadline, loop.time() + PROGRESS_SECONDS))
            if result["messages"] or loop.time() >= deadline:
                return answer(result)
            waited += PROGRESS_SECONDS
            await progress(waited)
    raise AssertionError("unreachable")  # pragma: no cover


class Door(MCPServer):
    """The SDK's server, checking every tool's arguments before the tool runs (one
    place for every tool, as the API's parsers check every body)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            check_data(arguments)
        except UnsafeInput as exc:
            raise ToolError(str(exc)) from None
        return await super().call_tool(name, arguments, context)


def build(identify: Identify = identify_by_token) -> MCPServer:
    """The server with its tools; ``identify`` tells who calls. It publishes nothing,
    so it serves no ``subscriptions/listen`` stream."""
    server: MCPServer = Door("markus", instructions=INSTRUCTIONS, subscriptions=False)

    @server.tool(name="inbox_wait")
    async def wait_on_inbox(
        ctx: Context, timeout_seconds: float = 30.0, after_cursor: str | None = None, agent_id: str | None = None
    ) -> dict[str, Any]:
        """Wait until a message arrives in your AgentBus inbox, or timeout_seconds pass
        (at most 3600). Returns messages and next_cursor (pass it back as after_cursor: no
        message is skipped or repeated) and timed_out. Progress notifications come while it waits."""
        caller = await identify(ctx)

        async def progress(waited: float) -> None:
            with contextlib.suppress(Exception):  # a client that asked for none
                await ctx.report_progress(waited, timeout_seconds, WAITING)

        return await wait_for_messages(caller, timeout_seconds, after_cursor, agent_id, progress)

    @server.tool(name="inbox_pending")
    async def count_inbox(ctx: Context, agent_id: str | None = None) -> dict[str, Any]:
        """How many messages wait in your inbox, at once."""
        caller = await identify(ctx)

        def pending() -> dict[str, Any]:
            agent = _inbox_agent(caller, agent_id, "agents_agentbus_pending_retrieve")
            return {"agentId": agent.id, "pending": selectors.pending_count(agent.id)}

        result: dict[str, Any] = await _run(pending)
        return result

    @server.tool(name="inbox_drain")
    async def drain_inbox(
        ctx: Context, peek: bool = False, limit: int = selectors.DEFAULT_LIMIT, agent_id: str | None = None
    ) -> dict[str, Any]:
        """Take what waits in your inbox at once, moving the server-side cursor past it
        (peek: look without consuming). Returns messages and next_cursor."""
        caller = await identify(ctx)
        if not 1 <= limit <= selectors.MAX_LIMIT:
            raise ToolError(f"limit must be an integer from 1 to {selectors.MAX_LIMIT}")

        def drain() -> dict[str, Any]:
            agent = _inbox_agent(caller, agent_id, "agents_agentbus_drain_create")
            if not peek and caller.auth is None:
                raise ToolError("draining consumes the agent's inbox: only the agent's own token may (use peek)")
            return services.inbox_drain(agent_id=agent.id, peek=peek, limit=limit, actor=caller_ref(caller))

        result: dict[str, Any] = await _run(drain)
        return result

    @server.tool()
    async def bus_send(
        ctx: Context,
        to: str,
        text: str | None = None,
        payload: dict[str, Any] | None = None,
        topic: str | None = None,
        stream_id: str | None = None,
        sender: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Send a colleague a message (text, or a JSON payload) on the AgentBus: a new
        stream to them, or appended to stream_id (one you take part in). Returns the chunk.
        idempotency_key (your own, 1 to 200 visible ASCII characters): sent again with
        it, the message is stored once and the first send is returned (replayed: true)."""
        caller = await identify(ctx)
        body = _payload(text, payload)
        key = _key(idempotency_key)

        @transaction.atomic  # a refused append (the pace) leaves no stream it opened
        def send() -> dict[str, Any]:
            me = access.access_acting_agent(caller, sender if sender is not None else _own_id(caller))
            recipient = access.access_recipients(caller, [to])[0]
            ref = caller_ref(caller)
            if stream_id is None:
                stream, chunk, replayed = services.stream_send_once(
                    sender=me, recipient=recipient, payload=body, topic=topic, actor=ref, request_key=key
                )
            else:
                stream = access.access_stream(caller, stream_id)
                chunk, replayed = services.stream_append_once(
                    stream_id=stream.id, sender=me, payload=body, topic=topic, actor=ref, request_key=key
                )
            return {"streamId": stream.id, **selectors.chunk_data(chunk), "replayed": replayed}

        result: dict[str, Any] = await _run(send)
        return result

    @server.tool()
    async def bus_request(
        ctx: Context,
        to: str,
        text: str | None = None,
        payload: dict[str, Any] | None = None,
        timeout_seconds: float = 30.0,
        topic: str | None = None,
        sender: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Ask a colleague and wait for the answer (at most timeout_seconds): the request,
        the reply and timed_out. idempotency_key (your own): asked again with it, the
        first request's reply is waited for (replayed: true), nothing is asked twice."""
        caller = await identify(ctx)
        body = _payload(text, payload)
        key = _key(idempotency_key)
        if not 0 <= timeout_seconds <= MAX_WAIT_SECONDS:
            raise ToolError(f"timeout_seconds must be between 0 and {MAX_WAIT_SECONDS:g}")

        def parties() -> tuple[Agent, Agent, Waiter]:
            me = access.access_acting_agent(caller, sender if sender is not None else _own_id(caller))
            return me, access.access_recipients(caller, [to])[0], waiter_for(caller)

        me, recipient, waiter = await _run(parties)
        try:
            slot = WAITS.claim(waiter)
        except APIException as exc:
            raise ToolError(_text(exc)) from None
        with slot:
            try:
                result: dict[str, Any] = await stream_request(
                    sender=me,
                    recipient=recipient,
                    payload=body,
                    topic=topic,
                    timeout=timeout_seconds,
                    actor=waiter.caller,
                    request_key=key,
                )
            except (MarkusError, APIException, Http404) as exc:
                raise ToolError(_text(exc)) from None
        return result

    @server.tool()
    async def bus_reply(
        ctx: Context,
        stream_id: str,
        text: str | None = None,
        payload: dict[str, Any] | None = None,
        sender: str | None = None,
    ) -> dict[str, Any]:
        """Answer a stream addressed to you (the streamId of a message in your inbox): a
        colleague's request or question gets your answer and is closed (the asker's
        bus_request returns it); a person's chat (stream hub.chat.<session>) shows it as
        your reply; in a group stream it is your next message. Returns the chunk. A
        task's conversation is answered with task_comment."""
        caller = await identify(ctx)
        body = _payload(text, payload)

        def reply() -> dict[str, Any]:
            me = access.access_acting_agent(caller, sender if sender is not None else _own_id(caller))
            chunk = services.stream_reply(responder=me, stream_id=stream_id, payload=body, actor=caller_ref(caller))
            return {**selectors.chunk_data(chunk), "replyTo": chunk.stream.reply_to}

        result: dict[str, Any] = await _run(reply)
        return result

    @server.tool()
    async def agent_list_colleagues(ctx: Context) -> dict[str, Any]:
        """The agents you may address on the bus: your team's and your owner's (a user:
        the agents they may see)."""
        caller = await identify(ctx)

        def colleagues() -> dict[str, Any]:
            if caller.auth is not None:
                rows = access.reachable_agents_for(agent=caller.auth, user=None).exclude(id=caller.auth.id)
            else:
                rows = visible_agents(caller)
            return {
                "agents": [
                    {"id": a.id, "name": a.name, "role": a.role, "kind": a.kind, "status": a.status}
                    for a in rows.order_by("name", "id")[:200]
                ]
            }

        result: dict[str, Any] = await _run(colleagues)
        return result

    @server.tool()
    async def task_list(ctx: Context, status: str | None = None, limit: int = 50) -> dict[str, Any]:
        """The tasks you may see (assigned to you, to review, of your team), newest first."""
        caller = await identify(ctx)
        if status is not None and status not in TaskState.values:
            raise ToolError(f"unknown status {status!r}; expected one of: {', '.join(TaskState.values)}")
        if not 1 <= limit <= 200:
            raise ToolError("limit must be an integer from 1 to 200")

        def tasks() -> dict[str, Any]:
            rows = work.tasks_visible_to(_actor(caller))
            if status:
                rows = rows.filter(status=status)
            rows = rows.order_by("-created_at", "-id")
            return {
                "tasks": [work.task_data(t) for t in work.with_dependencies(rows)[:limit]],
                "totalCount": rows.count(),
            }

        result: dict[str, Any] = await _run(tasks)
        return result

    @server.tool()
    async def task_get(ctx: Context, task_id: str) -> dict[str, Any]:
        """A task with its comments."""
        caller = await identify(ctx)

        def get() -> dict[str, Any]:
            task = work.access_task(_actor(caller), task_id)
            return {**work.task_data(task), "comments": work.task_comments(task)}

        result: dict[str, Any] = await _run(get)
        return result

    @server.tool()
    async def task_comment(
        ctx: Context, task_id: str, text: str, reply_to_comment_id: str | None = None
    ) -> dict[str, Any]:
        """Comment on a task (reply_to_comment_id: answer one comment)."""
        caller = await identify(ctx)

        def comment() -> dict[str, Any]:
            actor = _actor(caller)
            task = work.access_task(actor, task_id)
            made = work_services.task_comment_create(
                task_id=task.id, actor=actor, content=text, reply_to_comment_id=reply_to_comment_id
            )
            return {**work.comment_data(made), **work.quiet_note(made)}

        result: dict[str, Any] = await _run(comment)
        return result

    @server.tool()
    async def task_submit_review(ctx: Context, task_id: str, note: str = "") -> dict[str, Any]:
        """Submit your task for review (its assignee only), with a note on what was done."""
        caller = await identify(ctx)

        def submit() -> dict[str, Any]:
            actor = _actor(caller)
            task = work.access_task(actor, task_id)
            if caller.auth is not None and task.assignee_id != caller.auth.id:
                raise ToolError("only the assignee submits a task for review")
            task = work_services.task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=actor, note=note)
            return work.task_data(task)

        result: dict[str, Any] = await _run(submit)
        return result

    @server.tool()
    async def task_transition(
        ctx: Context, task_id: str, status: str, note: str = "", cascade: bool | None = None
    ) -> dict[str, Any]:
        """Move a task to another status (the transitions the task's state allows; a 409's
        message names them). Cancelling a task that others wait on needs ``cascade``:
        true cancels them too, false this task alone; without it the refusal names them."""
        caller = await identify(ctx)

        def move() -> dict[str, Any]:
            actor = _actor(caller)
            task = work.access_task(actor, task_id)
            moved, cascaded = work_services.task_move(actor, task, to_status=status, note=note, cascade=cascade)
            return {**work.task_data(moved), "cascaded": cascaded}

        result: dict[str, Any] = await _run(move)
        return result

    @server.tool()
    async def task_review(ctx: Context, task_id: str, verdict: str, comment: str = "") -> dict[str, Any]:
        """Review a task you are the reviewer of, while it is in review: verdict approve
        (it is completed) or request_changes (back to its assignee, with your comment
        saying what to change: required). The comment is posted on the task."""
        caller = await identify(ctx)

        def verdict_given() -> dict[str, Any]:
            actor = _actor(caller)
            task = work.access_task(actor, task_id)
            return work.task_data(review.task_review(task_id=task.id, actor=actor, verdict=verdict, comment=comment))

        result: dict[str, Any] = await _run(verdict_given)
        return result

    return server


def _own_id(caller: Caller) -> str:
    if caller.auth is None:
        raise ToolError("sender is required with a user's token: the agent you speak for")
    return caller.auth.id


def _actor(caller: Caller) -> Actor:
    return Actor.for_agent(caller.auth) if caller.auth is not None else Actor.for_user(caller.user)


# --------------------------------------------------------------------------- over HTTP


class McpHttpApp:
    """``/mcp/`` as an ASGI app: answers anything but a POST with 405 (no standing
    stream: the SDK would hold a GET open with pings for ever), refuses a request
    without a valid token (401) before the SDK sees it, runs the SDK's session manager
    (stateless: every request stands alone, so any server process answers it) once per
    process, started on first use (daphne runs no ASGI lifespan)."""

    def __init__(self) -> None:
        self._app: Any = None
        self._started: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def _ensure(self) -> Any:
        if self._app is None:
            server = build()
            self._app = server.streamable_http_app(
                streamable_http_path="/mcp/",
                stateless_http=True,
                # Identity is a bearer token, never a cookie: a rebinding page has nothing to ride on.
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            self._manager = server.session_manager
            self._started = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run())
        assert self._started is not None
        await self._started.wait()
        return self._app

    async def _run(self) -> None:
        assert self._started is not None
        async with self._manager.run():
            self._started.set()
            await asyncio.Event().wait()  # for the life of the process

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") != ALLOWED_METHODS:
            detail = "the MCP door takes POST only: it opens no stream"
            await _refuse(send, 405, detail, "method_not_allowed", (b"allow", ALLOWED_METHODS.encode()))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            caller = await sync_to_async(_caller_of)(headers.get("authorization"))
        except Exception as exc:
            later = retry_later(exc)  # the database cannot serve it now: as the API answers
            if later is None:
                raise
            await _refuse(send, 503, later.message, later.code, (b"retry-after", str(later.seconds).encode()))
            return
        if caller is None:
            detail = "no valid token: Authorization: Bearer <agent token>"
            await _refuse(send, 401, detail, "not_authenticated", (b"www-authenticate", b"Bearer"))
            return
        body, more = await _read_body(receive)
        call = None if more else _plain_inbox_wait(headers, body)
        if call is not None:
            await _serve_inbox_wait(caller, call, receive, send)
            return
        app = await self._ensure()
        scope = {**scope, SCOPE_CALLER: caller}
        if scope.get("path") == "/mcp":  # the SDK's route is /mcp/
            scope["path"] = "/mcp/"
        await app(scope, _replay(body, more, receive), send)


# The door's own path for ``inbox_wait`` (``McpHttpApp``): the SDK's stateless transport
# spends a session, memory streams, an SSE response and their tasks on every request, for
# as long as a wait parks (about 3x a REST wait's memory, and its dispatch on the way out
# of a woken wait). A plain, valid ``tools/call`` of ``inbox_wait`` is answered here, in
# the SDK's own wire form (server-sent events: progress notifications when the client
# asked for them, then the result, as the SDK writes it); anything else goes to the SDK.
BODY_LIMIT = 64 * 1024  # a larger body is the SDK's to read
WAIT_ARGUMENTS = {"timeout_seconds": (int, float), "after_cursor": (str, type(None)), "agent_id": (str, type(None))}


async def _read_body(receive: Any) -> tuple[bytes, bool]:
    """The request's body up to BODY_LIMIT, and whether more follows."""
    body = b""
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            return body, False
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body, False
        if len(body) > BODY_LIMIT:
            return body, True


def _replay(body: bytes, more: bool, receive: Any) -> Any:
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


def _plain_inbox_wait(headers: dict[str, str], body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC request when it is a plain, valid ``inbox_wait`` call (the SDK would
    run it without complaint), else None."""
    from mcp.server.streamable_http import CONTENT_TYPE_JSON, CONTENT_TYPE_SSE
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    accepted = {t.split(";")[0].strip().lower() for t in headers.get("accept", "").split(",")}
    if not {CONTENT_TYPE_JSON, CONTENT_TYPE_SSE} <= accepted:
        return None
    if headers.get("content-type", "").split(";")[0].strip().lower() != CONTENT_TYPE_JSON:
        return None
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0" or doc.get("method") != "tools/call":
        return None
    rpc_id, params = doc.get("id"), doc.get("params")
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, (str, int)) or not isinstance(params, dict):
        return None
    arguments = params.get("arguments", {})
    if params.get("name") != "inbox_wait" or not isinstance(arguments, dict):
        return None
    for name, value in arguments.items():
        if name not in WAIT_ARGUMENTS or isinstance(value, bool) or not isinstance(value, WAIT_ARGUMENTS[name]):
            return None
    try:
        check_data(arguments)
    except UnsafeInput:
        return None
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return {"id": rpc_id, "arguments": arguments, "progress": token}


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(message, separators=(",", ":")).encode() + b"\r\n\r\n"


async def _serve_inbox_wait(caller: Caller, call: dict[str, Any], receive: Any, send: Any) -> None:
    """The wait, ended early (and its slot given back) when the client goes away."""
    serving = asyncio.ensure_future(_answer_inbox_wait(caller, call, send))
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({serving, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not serving.done():
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
    if serving.done() and not serving.cancelled():
        serving.result()  # raises what the wait raised


async def _disconnected(receive: Any) -> None:
    while (await receive()).get("type") != "http.disconnect":
        pass


async def _answer_inbox_wait(caller: Caller, call: dict[str, Any], send: Any) -> None:
    arguments = call["arguments"]
    timeout = float(arguments.get("timeout_seconds", 30.0))
    started = False

    async def start() -> None:
        nonlocal started
        if not started:
            started = True
            headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})

    async def progress(waited: float) -> None:
        if call["progress"] is None:
            return
        await start()
        params = {"progressToken": call["progress"], "progress": waited, "total": timeout}
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {**params, "message": WAITING}}
        await send({"type": "http.response.body", "body": _event(note), "more_body": True})

    try:
        result = await wait_for_messages(
            caller, timeout, arguments.get("after_cursor"), arguments.get("agent_id"), progress
        )
        answer = {
            "content": [{"type": "text", "text": json.dumps(result, indent=2, ensure_ascii=False)}],
            "structuredContent": result,
            "isError": False,
        }
    except ToolError as exc:
        answer = {"content": [{"type": "text", "text": f"Error executing tool inbox_wait: {exc}"}], "isError": True}
    await start()
    response = {"jsonrpc": "2.0", "id": call["id"], "result": answer}
    await send({"type": "http.response.body", "body": _event(response), "more_body": False})


async def _refuse(send: Any, status: int, detail: str, code: str, header: tuple[bytes, bytes]) -> None:
    """An answer in the API's error shape, before the SDK sees the request."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), header],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps({"detail": detail, "code": code}).encode()})


asgi_app = McpHttpApp()
