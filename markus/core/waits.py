"""Requests that wait (a bus inbox wait, a bus request waiting for its answer, an MCP
or A2A wait, a chat waiting for its reply): they park on the event loop and hold no
thread, and only so many wait at once (``markus.core.limits``).

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
   its synchronous steps run there, one at a time, and its wait holds no thread. Its
   middleware (``settings.MIDDLEWARE``) runs in at most two thread hops, not two per
   middleware (``_ParkedChain``): every before-half in one, every after-half in one, or
   none when the request never loaded its session (a token's call: no after-half needs
   the database, they run in the loop). So a woken wait answers with no thread hop
   between its wake-up and its answer (Django's own chain crossed seven times: each
   ``MiddlewareMixin`` awaits its ``process_request`` and ``process_response`` through a
   ``sync_to_async`` of its own).
3. ``WAITS.claim(waiter, chat=...)`` takes a wait slot, or raises ``TooManyWaits`` (429,
   ``Retry-After``, the cap and its limit in ``detail``, ``cap`` and ``limit``). The slot
   is given back when the wait ends (``with slot:`` or ``slot.release()``), and in any
   case when the request ends (the handler releases what its request still holds).

The caps, so that one person cannot starve the rest (issue 35: 36 agents' tokens of one
person held every wait of the process, and everyone else's chat answered 429):

- per caller (``WAITS_PER_CALLER``): an agent token's or a user's waits, of any kind;
- per person (``WAITS_PER_PERSON``): bus waits (everything but a person's chat) count
  against a person too: a user's own, and every token of the agents they own (an agent
  nobody owns: its team's owner; neither: the agent alone). ``markus.agents.auth.waiter_for``
  says who a caller is;
- per server (``WAITS_PER_SERVER``): the process's waits of every kind together;
- the chat reserve (``WAITS_CHAT_RESERVE``): bus waits take at most the server's waits
  less the reserve. A person's chat (a user, not an agent token, waiting for an agent's
  reply) may take any slot the server has free, and is not counted against the person's
  cap: a person's chat never waits behind idle bus waits, theirs or anyone's.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import resolve, set_urlconf
from django.utils.deprecation import MiddlewareMixin
from django.utils.log import log_response
from django.utils.module_loading import import_string
from rest_framework.exceptions import Throttled

from markus.core.limits import (
    WAIT_RETRY_AFTER_SECONDS,
    waits_chat_reserve,
    waits_per_caller,
    waits_per_person,
    waits_per_server,
)

SHARED_THREADS = 4  # the threads the synchronous steps of every waiting request share

View = TypeVar("View", bound=Callable[..., Any])


def parks(view: View) -> View:
    """Mark a view that waits: ``ParkingASGIHandler`` runs it without a thread of its own."""
    view.parks = True  # type: ignore[attr-defined]
    return view


class TooManyWaits(Throttled):
    """429 with ``Retry-After``: a cap of the waits is reached; the answer names it
    (``cap``) and its ``limit``."""

    def __init__(self, cap: str, limit: int, detail: str) -> None:
        super().__init__(wait=WAIT_RETRY_AFTER_SECONDS, detail=detail)
        self.extra = {"cap": cap, "limit": limit}


class Waiter(NamedTuple):
    """Who waits: the caller (``agent:<id>``, ``user:<pk>``) and the person whose share
    its bus waits count against (``person:<pk>``; an agent nobody owns: the agent)."""

    caller: str
    person: str


class Slot:
    """One wait, counted until it is released (once; releasing again does nothing)."""

    def __init__(self, caps: WaitCaps, waiter: Waiter, chat: bool) -> None:
        self._caps = caps
        self.waiter = waiter
        self.chat = chat
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._caps._release(self.waiter, self.chat)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# The slots the current request holds, for the handler to release when it ends.
_request_slots: contextvars.ContextVar[list[Slot]] = contextvars.ContextVar("markus_wait_slots")


def _count_down(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


class WaitCaps:
    """How many waits each caller, each person, the bus and the whole process hold (see
    the module's docstring); claimed on the event loop, released from anywhere."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_caller: Counter[str] = Counter()
        self._by_person: Counter[str] = Counter()  # bus waits only
        self._bus = 0
        self._total = 0

    def claim(self, waiter: Waiter, *, chat: bool = False) -> Slot:
        """A slot for a wait of ``waiter``'s: a person's chat (``chat``), or a bus wait."""
        per_caller, per_person, per_server = waits_per_caller(), waits_per_person(), waits_per_server()
        per_bus = max(per_server - waits_chat_reserve(), 0)
        with self._lock:
            if self._by_caller[waiter.caller] >= per_caller:
                detail = f"too many waits at once: at most {per_caller} per caller (an agent token or a user)."
                raise TooManyWaits("per caller", per_caller, detail)
            if not chat and self._by_person[waiter.person] >= per_person:
                detail = f"too many waits at once: at most {per_person} per person (a user and their agents' tokens)."
                raise TooManyWaits("per person", per_person, detail)
            if self._total >= per_server:
                detail = f"too many waits on this server: at most {per_server} per server process."
                raise TooManyWaits("per server", per_server, detail)
            if not chat and self._bus >= per_bus:
                detail = (
                    f"too many bus waits on this server: at most {per_bus} per server process; "
                    f"the other {per_server - per_bus} are the chat reserve, for people's chats."
                )
                raise TooManyWaits("chat reserve", per_bus, detail)
            self._by_caller[waiter.caller] += 1
            if not chat:
                self._by_person[waiter.person] += 1
                self._bus += 1
            self._total += 1
        slot = Slot(self, waiter, chat)
        held = _request_slots.get(None)
        if held is not None:
            held.append(slot)
        return slot

    def _release(self, waiter: Waiter, chat: bool) -> None:
        with self._lock:
            _count_down(self._by_caller, waiter.caller)
            if not chat:
                _count_down(self._by_person, waiter.person)
                self._bus -= 1
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


def _passed_on(request: HttpRequest) -> None:
    """The inner ``get_response`` of a middleware that is not a ``MiddlewareMixin``, in
    the parked chain: it passing the request on answers None."""
    return None


class _ParkedChain:
    """``settings.MIDDLEWARE`` for a request to a ``parks`` view, in two thread hops.

    A ``MiddlewareMixin`` runs as Django runs it (``process_request`` outermost first,
    then every ``process_view``, the view, ``process_exception`` and ``process_response``
    innermost first), an exception in it answers as Django's own wrapper answers it
    (``response_for_exception``). Any other middleware (ours: ``refuse_bad_characters``,
    the static files) is called synchronously with an inner ``get_response`` that answers
    None: it answers the request itself or passes it on unchanged, and has no after-half.
    """

    def __init__(self, handler: ASGIHandler) -> None:
        self.handler = handler
        self.layers: list[Any] = []
        for path in settings.MIDDLEWARE:
            try:
                self.layers.append(import_string(path)(_passed_on))
            except MiddlewareNotUsed:
                continue

    def _before(self, request: HttpRequest) -> tuple[HttpResponseBase | None, int, Any]:
        """The before-halves and the view's resolution: (a response that ends the request
        early, how many layers were entered, the view and its arguments)."""
        entered = 0
        for layer in self.layers:
            try:
                if isinstance(layer, MiddlewareMixin):
                    response = layer.process_request(request) if hasattr(layer, "process_request") else None
                else:
                    response = layer(request)
            except Exception as exc:  # its own wrapper answers: the layers outside it see the answer
                return response_for_exception(request, exc), entered, None
            entered += 1
            if response is not None:
                return response, entered, None
        try:
            view = self.handler.resolve_request(request)
            callback, args, kwargs = view
            for layer in self.layers:
                if isinstance(layer, MiddlewareMixin) and hasattr(layer, "process_view"):
                    response = layer.process_view(request, callback, args, kwargs)
                    if response is not None:
                        return response, entered, None
            return None, entered, view
        except Exception as exc:
            return response_for_exception(request, exc), entered, None

    def _after(
        self, request: HttpRequest, response: HttpResponseBase | None, entered: int, error: Exception | None
    ) -> HttpResponseBase:
        """The view's exception (``process_exception``), then every after-half."""
        layers = self.layers[:entered]
        if error is not None:
            for layer in reversed(layers):
                if isinstance(layer, MiddlewareMixin) and hasattr(layer, "process_exception"):
                    response = layer.process_exception(request, error)
                    if response is not None:
                        break
            if response is None:
                response = response_for_exception(request, error)
        assert response is not None
        if hasattr(response, "render") and callable(response.render):
            response = response.render()
        for layer in reversed(layers):
            if isinstance(layer, MiddlewareMixin) and hasattr(layer, "process_response"):
                try:
                    response = layer.process_response(request, response)
                except Exception as exc:
                    response = response_for_exception(request, exc)
        return response

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response, entered, view = await sync_to_async(self._before)(request)
        error: Exception | None = None
        if response is None:
            callback, args, kwargs = view
            try:
                view_function: Callable[..., Any] = self.handler.make_view_atomic(callback)  # a parks view: async
                response = await view_function(request, *args, **kwargs)
                self.handler.check_response(response, callback)
            except Exception as exc:
                error = exc
        if error is None and not _session_touched(request):
            # No after-half needs the database (only a session save would): run them here
            # and a woken wait answers with no thread hop at all.
            return self._after(request, response, entered, None)
        return await sync_to_async(self._after)(request, response, entered, error)


def _session_touched(request: HttpRequest) -> bool:
    """Did the request load its session (a browser's)? Then saving it may need the
    database. A token's call never loads it."""
    session = getattr(request, "session", None)
    return bool(settings.SESSION_SAVE_EVERY_REQUEST or (session is not None and session.accessed))


# Set while a request to a ``parks`` view is handled.
_parking: contextvars.ContextVar[bool] = contextvars.ContextVar("markus_parking", default=False)


class ParkingASGIHandler(ASGIHandler):
    """Django's ASGI handler; a request to a ``parks`` view shares a thread and runs its
    middleware in two hops (see the module's docstring), and every wait slot it still
    holds is released when it ends."""

    def __init__(self) -> None:
        super().__init__()
        self._parked_chain = _ParkedChain(self)

    async def get_response_async(self, request: HttpRequest) -> Any:
        if not _parking.get():
            return await super().get_response_async(request)
        set_urlconf(settings.ROOT_URLCONF)
        response: Any = await self._parked_chain(request)
        response._resource_closers.append(request.close)
        if response.status_code >= 400:
            await sync_to_async(log_response, thread_sensitive=False)(
                "%s: %s", response.reason_phrase, request.path, response=response, request=request
            )
        return response

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _parks(scope):
            await super().__call__(scope, receive, send)
            return
        executor = _EXECUTORS[next(_turn) % SHARED_THREADS]
        held: list[Slot] = []
        token = _request_slots.set(held)
        parking = _parking.set(True)
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            for slot in held:
                slot.release()
            _parking.reset(parking)
            _request_slots.reset(token)
