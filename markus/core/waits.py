"""Requests that wait (a bus inbox wait, a bus request waiting for its answer, a chat
waiting for its reply): they park on the event loop and hold no thread, and only so many
wait at once (``markus.core.limits``: per caller and per server process).

Why a waiting async view would hold a thread: Django's ASGI handler runs each request in
a ``ThreadSensitiveContext`` of its own, so the request's first synchronous step (a
middleware's ``process_request``, the authentication, a query) starts a thread for that
request, which lives until the request ends; for a wait, idle for minutes. (A
synchronous middleware in the chain is worse: the async view then runs through
``async_to_sync`` and blocks that thread; every middleware of ours is async-capable.)

1. ``parks`` marks a view that waits.
2. ``ParkingASGIHandler`` (Django's ASGI handler, ``markus.asgi``) runs a request to such
   a view in a ``ThreadSensitiveContext`` over one of ``SHARED_THREADS`` single-thread
   executors (asgiref's documented way to choose the thread of thread-sensitive code):
   its synchronous steps run there, one at a time, and its wait holds no thread.
3. ``WAITS.claim(caller)`` takes one of the caller's and one of the server's wait slots,
   or raises ``TooManyWaits`` (429, ``Retry-After``, the limit in ``detail``). The slot
   is given back when the wait ends (``with slot:`` or ``slot.release()``), and in any
   case when the request ends (the handler releases what its request still holds).
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler
from django.urls import resolve
from rest_framework.exceptions import Throttled

from markus.core.limits import WAIT_RETRY_AFTER_SECONDS, waits_per_caller, waits_per_server

SHARED_THREADS = 4  # the threads the synchronous steps of every waiting request share

View = TypeVar("View", bound=Callable[..., Any])


def parks(view: View) -> View:
    """Mark a view that waits: ``ParkingASGIHandler`` runs it without a thread of its own."""
    view.parks = True  # type: ignore[attr-defined]
    return view


class TooManyWaits(Throttled):
    """429 with ``Retry-After``: the caller's or the server's waits are all taken."""

    def __init__(self, detail: str) -> None:
        super().__init__(wait=WAIT_RETRY_AFTER_SECONDS, detail=detail)


class Slot:
    """One wait, counted until it is released (once; releasing again does nothing)."""

    def __init__(self, caps: WaitCaps, caller: str) -> None:
        self._caps = caps
        self.caller = caller
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._caps._release(self.caller)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# The slots the current request holds, for the handler to release when it ends.
_request_slots: contextvars.ContextVar[list[Slot]] = contextvars.ContextVar("markus_wait_slots")


class WaitCaps:
    """How many waits each caller (``agent:<id>``, ``user:<pk>``) and the whole process
    hold; claimed on the event loop, released from anywhere."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_caller: Counter[str] = Counter()
        self._total = 0

    def claim(self, caller: str) -> Slot:
        per_caller, per_server = waits_per_caller(), waits_per_server()
        with self._lock:
            if self._by_caller[caller] >= per_caller:
                raise TooManyWaits(f"too many waits at once: at most {per_caller} per caller (agent token or user).")
            if self._total >= per_server:
                raise TooManyWaits(f"too many waits on this server: at most {per_server} per server process.")
            self._by_caller[caller] += 1
            self._total += 1
        slot = Slot(self, caller)
        held = _request_slots.get(None)
        if held is not None:
            held.append(slot)
        return slot

    def _release(self, caller: str) -> None:
        with self._lock:
            self._by_caller[caller] -= 1
            if self._by_caller[caller] <= 0:
                del self._by_caller[caller]
            self._total -= 1

    def in_flight(self, caller: str | None = None) -> int:
        with self._lock:
            return self._total if caller is None else self._by_caller[caller]


WAITS = WaitCaps()

_EXECUTORS = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"markus-waits-{i}") for i in range(SHARED_THREADS)]
_turn = itertools.count()


def _parks(scope: dict[str, Any]) -> bool:
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    try:
        match = resolve(path)
    except Exception:  # no such URL, or a path Django refuses: it answers the usual way
        return False
    return bool(getattr(match.func, "parks", False))


class ParkingASGIHandler(ASGIHandler):
    """Django's ASGI handler; a request to a ``parks`` view shares a thread (see the
    module's docstring), and every wait slot it still holds is released when it ends."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _parks(scope):
            await super().__call__(scope, receive, send)
            return
        executor = _EXECUTORS[next(_turn) % SHARED_THREADS]
        held: list[Slot] = []
        token = _request_slots.set(held)
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            for slot in held:
                slot.release()
            _request_slots.reset(token)
