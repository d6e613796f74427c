"""This process's connections to its MCP tool servers, through the official ``mcp`` SDK.

One event loop in one daemon thread per process holds every connection; the worker's
threads submit calls to it and wait for the answer (bounded by the server's timeout).
A stdio server is started on its first use in the process and kept; an http server is
connected on first use alike (its requests carry the timeout). A call made while a
connection starts waits for it as the call that started it does, each at most the
server's timeout (then ``ServerDown``: still starting). A connection that breaks
(the process exited, the endpoint went away) is replaced once on the next use; should
that one break too before a call succeeds, the server counts as down for
``DOWN_SECONDS`` and every call answers so. A changed configuration (the operator edited
the server) opens a new connection. At the worker's shutdown (and at exit) every
connection is closed and every stdio server stopped; a forked child starts afresh.

Nothing here touches the database: the caller records what happened (``offered``)."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the SDK is imported when a connection is made, not with Django
    from mcp import Client

T = TypeVar("T")
# After a replaced connection broke too, the server is not tried again for this long.
DOWN_SECONDS = 30.0
# Pages of a tool listing read at most (a server with more tools is cut there).
LIST_PAGES = 10
# A stdio server's last words on its standard error, kept for the operator's error.
STDERR_TAIL = 600


class ServerDown(Exception):
    """The server could not be reached or stopped answering: the message says why."""


class ServerRefused(Exception):
    """The server answered the request with an error (it is up)."""


@dataclass(frozen=True)
class Spec:
    """What a connection is made from (a ToolServer's configuration)."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 30.0

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True, default=list).encode()).hexdigest()


@dataclass
class _Connection:
    spec: Spec
    fingerprint: str
    replaced: bool  # it replaces one that broke (no second replacement before a success)
    client: Client | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    error: str = ""
    closed: bool = False
    stderr: Any = None

    async def serve(self) -> None:
        """Open the connection, hold it until told to stop, then close it (stopping a
        stdio server) in the same task, as the SDK's context managers require."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                self.client = await stack.enter_async_context(self._client(stack))
                self.ready.set()
                await self.stop.wait()
        except BaseException as exc:
            self.error = self.error or _describe(exc) + self._stderr_tail()
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.client = None
            self.closed = True
            self.ready.set()
            if self.stderr is not None:
                self.stderr.close()

    def _client(self, stack: contextlib.AsyncExitStack) -> Client:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        spec = self.spec
        if spec.transport == "stdio":
            self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            command, env = executable(spec.command), dict(spec.env) or None
            params = StdioServerParameters(command=command, args=list(spec.args), env=env)
            return Client(stdio_client(params, errlog=self.stderr), read_timeout_seconds=spec.timeout)
        from . import pinned  # every connection to an address checked as it is made

        http = pinned.client(dict(spec.headers), spec.timeout)
        stack.push_async_callback(http.aclose)
        return Client(streamable_http_client(spec.url, http_client=http), read_timeout_seconds=spec.timeout)

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.seek(0)
            tail = self.stderr.read()[-STDERR_TAIL:].strip()
        except (OSError, ValueError):
            return ""
        return f" (its last output: {tail})" if tail else ""


def executable(command: str) -> str:
    """A stdio server's command as it is started: a bare name is looked up in this
    interpreter's own ``bin`` first (the virtualenv Markus runs from, where ``pip``
    installs ``mcp-server-git``; ``make run`` does not put it on ``PATH``), else it is
    left to the process's ``PATH``; a command with a path is run as given."""
    if os.sep in command or (os.altsep and os.altsep in command):
        return command
    return shutil.which(command, path=str(Path(sys.executable).parent)) or command


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip()
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


class Runtime:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, _Connection] = {}
        self._down_until: dict[str, float] = {}

    # ------------------------------------------------------------------ the loop

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="markus-toolservers", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, coro: Awaitable[T], timeout: float) -> T:
        loop = self._ensure_loop()
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)  # type: ignore[arg-type]
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    # --------------------------------------------------------------- connections

    async def _connection(self, spec: Spec) -> tuple[_Connection, Client]:
        """The server's connection once it is ready: the current one or a new one. A call
        made while it starts waits for it like the call that started it (every one at
        most the server's timeout)."""
        fingerprint = spec.fingerprint()
        conn = self._connections.get(spec.name)
        while conn is not None and conn.fingerprint != fingerprint:  # edited: start afresh
            await self._close(conn)
            if self._connections.get(spec.name) is conn:
                del self._connections[spec.name]
                self._down_until.pop(spec.name, None)
            conn = self._connections.get(spec.name)  # another call may have started it meanwhile
        if conn is None or conn.closed:
            conn = self._start(spec, fingerprint, broken=conn)
        if not conn.ready.is_set():
            try:
                await asyncio.wait_for(conn.ready.wait(), spec.timeout)
            except TimeoutError:
                conn.error = conn.error or f"it was still starting after {spec.timeout:g} s"
                await self._close(conn)
        if conn.client is None:
            raise ServerDown(f"tool server {spec.name} could not be reached: {conn.error or 'it closed'}")
        return conn, conn.client

    def _start(self, spec: Spec, fingerprint: str, broken: _Connection | None) -> _Connection:
        """A new connection replacing ``broken`` (once: a replacement that broke too
        leaves the server down for ``DOWN_SECONDS``), starting in its own task."""
        replaced = broken is not None
        if broken is not None and broken.replaced:
            until = self._down_until.setdefault(spec.name, time.monotonic() + DOWN_SECONDS)
            if time.monotonic() < until:
                raise ServerDown(
                    f"tool server {spec.name} stopped again after a restart ({broken.error or 'closed'}); "
                    f"it is tried again in {max(1, round(until - time.monotonic()))} s"
                )
            self._down_until.pop(spec.name, None)
            replaced = False
        conn = _Connection(spec, fingerprint, replaced=replaced)
        self._connections[spec.name] = conn
        conn.task = asyncio.get_running_loop().create_task(conn.serve())
        return conn

    async def _close(self, conn: _Connection) -> None:
        # Still starting, it heeds the stop only once ready: it is cancelled, once (a
        # second cancel breaks into the SDK's shielded stop of the process).
        starting = not conn.ready.is_set() and not conn.stop.is_set()
        conn.stop.set()
        if conn.task is not None and not conn.task.done():
            if starting:
                conn.error = conn.error or "it was stopped while starting"
                conn.task.cancel()
            _, pending = await asyncio.wait({conn.task}, timeout=5)
            if pending:
                conn.task.cancel()
        conn.closed = True

    async def _use(self, spec: Spec, fn: Callable[[Client], Awaitable[T]]) -> T:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        conn, client = await self._connection(spec)
        try:
            result = await asyncio.wait_for(fn(client), spec.timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:  # the server is slow, not gone
                raise ServerDown(f"tool server {spec.name} did not answer within {spec.timeout:g} s") from None
            if exc.code != CONNECTION_CLOSED:  # it answered an error: it is up
                raise ServerRefused(f"{spec.name}: {exc.message}") from None
            conn.error = _describe(exc) + conn._stderr_tail()
            await self._close(conn)
            raise ServerDown(f"tool server {spec.name} stopped answering: {conn.error}") from None
        except TimeoutError:
            raise ServerDown(f"tool server {spec.name} did not answer within {spec.timeout:g} s") from None
        except Exception as exc:
            conn.error = _describe(exc) + conn._stderr_tail()
            await self._close(conn)
            raise ServerDown(f"tool server {spec.name} stopped answering: {conn.error}") from None
        conn.replaced = False  # it works: a later break may be replaced again
        return result

    # ------------------------------------------------------------------- the API

    def list_tools(self, spec: Spec) -> list[dict[str, Any]]:
        """The server's tools as plain data (name, description, inputSchema, annotations)."""

        async def listing(client: Client) -> list[dict[str, Any]]:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            return tools

        return self._run(self._use(spec, listing), spec.timeout * 2 + 5)

    def call_tool(self, spec: Spec, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The result of a call as plain data (content, structuredContent, isError)."""

        async def call(client: Client) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)

        return self._run(self._use(spec, call), spec.timeout * 2 + 5)

    def forget(self, name: str) -> None:
        """Close the connection to a server (deleted, disabled or edited)."""
        conn = self._connections.pop(name, None)
        self._down_until.pop(name, None)
        if conn is not None and self._loop is not None:
            with contextlib.suppress(Exception):
                self._run(self._close(conn), 10)

    def shutdown(self) -> None:
        """Close every connection (stopping every stdio server), then the loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        connections, self._connections = list(self._connections.values()), {}

        async def close_all() -> None:
            await asyncio.gather(*(self._close(c) for c in connections), return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(5)

    def connected(self) -> list[str]:
        return sorted(n for n, c in self._connections.items() if not c.closed)


RUNTIME = Runtime()


def _after_fork() -> None:
    """A forked child has none of its parent's threads: it starts with no connections."""
    global RUNTIME
    RUNTIME = Runtime()


def runtime() -> Runtime:
    return RUNTIME


_hooked = False


def install_shutdown_hooks() -> None:
    """Stop the servers at the worker's shutdown and at exit (once per process)."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    os.register_at_fork(after_in_child=_after_fork)
    atexit.register(lambda: RUNTIME.shutdown())
    from celery.signals import worker_process_shutdown, worker_shutdown

    worker_shutdown.connect(lambda **_: RUNTIME.shutdown(), weak=False)
    worker_process_shutdown.connect(lambda **_: RUNTIME.shutdown(), weak=False)
