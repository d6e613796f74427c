"""The provider interface: given a system prompt, messages and tool schemas, return text,
tool calls and token usage.

Messages use the OpenAI chat shape (``role`` user / assistant / tool, ``tool_calls`` on
assistant turns, ``tool_call_id`` on tool results), because it is plain JSON and is what
gets persisted in an LLM session.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

COMPLETION_MARKER = "<<HANDLE_COMPLETE>>"

log = logging.getLogger(__name__)


class LLMCancelled(Exception):
    """The in-flight call was cancelled (the agent was stopped or paused)."""


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: Any) -> Any:
    """``value`` with every NUL byte and lone surrogate (in strings and keys, at any
    depth) replaced by U+FFFD: what an LLM writes is stored, and PostgreSQL refuses
    both in text and JSONB; a reply must not fail its item for a stray byte."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]

    def __post_init__(self) -> None:
        self.id, self.name, self.arguments = storable(self.id), storable(self.name), storable(self.arguments)


@dataclass
class Usage:
    """A call's tokens. ``prompt_tokens`` counts all input, ``cached`` the part of it
    the provider read from its prompt cache (priced apart: ``markus.usage.prices``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class LLMResponse:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: Why the model stopped, as the provider said it (``stop``, ``tool_calls``,
    #: ``end_turn`` ...); "" when it did not (the offline and scripted brains).
    finish_reason: str = ""

    def __post_init__(self) -> None:
        self.text = storable(self.text)

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


@dataclass
class CallContext:
    """What the loop knows about the call; the offline brain reads it, real providers
    ignore it, except for the two hooks:

    ``cancelled``: polled while a call is in flight (by the network providers from a
    watcher thread, every ``CANCEL_POLL_S``, so it must be callable from another thread);
    when it answers true the provider closes the stream and raises ``LLMCancelled``.

    ``on_delta``: called in the calling thread with each piece of answer text as the
    provider produces it, in order; the pieces joined are the turn's ``text``. Tool calls
    are not announced piecemeal: they come whole in the ``LLMResponse``. Without it a
    provider may still stream (the network ones do, to be cancellable).

    ``model``: the model this call was given (``get_provider(model=...)``), "" for the
    configured one; for the record and the tests, the provider is already built for it.

    ``usage``: set by a provider's ``judge`` (which answers one word) to what it spent."""

    scenario: str = ""
    agent_name: str = ""
    item: dict[str, Any] = field(default_factory=dict)
    cancelled: Callable[[], bool] = lambda: False
    on_delta: Callable[[str], None] | None = None
    model: str = ""
    #: What a ``judge`` call spent, set by the provider (``judge`` answers a word only).
    usage: Usage | None = None

    def emit(self, text: str) -> None:
        if text and self.on_delta is not None:
            self.on_delta(text)


def word_chunks(text: str) -> list[str]:
    """The text in word chunks (each word with the spaces before and after it), for
    providers that stream a whole answer piecewise; joined they are the text."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


class MarkerFilter:
    """Wraps an ``on_delta`` listener so it never hears the completion marker, even when
    the model's pieces split it (``"<<HANDLE_"``, ``"COMPLETE>>"``): text that could be
    the start of a marker is held back until the next piece tells. ``flush()`` at the end
    of the turn lets out what was held back."""

    def __init__(self, listener: Callable[[str], None], marker: str = COMPLETION_MARKER) -> None:
        self.listener = listener
        self.marker = marker
        self.held = ""

    def __call__(self, text: str) -> None:
        buffer = (self.held + text).replace(self.marker, "")
        keep = next(
            (n for n in range(min(len(buffer), len(self.marker) - 1), 0, -1) if self.marker.startswith(buffer[-n:])),
            0,
        )
        self.held = buffer[len(buffer) - keep :] if keep else ""
        out = buffer[: len(buffer) - keep]
        if out:
            self.listener(out)

    def flush(self) -> None:
        held, self.held = self.held, ""
        if held:
            self.listener(held)


#: How often the watcher thread asks ``CallContext.cancelled`` during a network call.
CANCEL_POLL_S = 0.2


class CancelWatch:
    """Cancels a streamed HTTP call from the process's watcher thread.

    While the block runs, the watcher asks ``cancelled()`` every ``CANCEL_POLL_S``.
    When it answers true, ``fired`` is set and the socket of the attached response is
    shut down, so a read blocked in the calling thread (a server that stalls between
    chunks, or before the first) returns at once and the server sees the connection
    closed. The calling thread calls ``check()`` between chunks and ``raised(exc)`` on
    an error, both of which turn a fired watch into ``LLMCancelled``."""

    def __init__(self, cancelled: Callable[[], bool]) -> None:
        self.cancelled = cancelled
        self.fired = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None

    def __enter__(self) -> CancelWatch:
        _watcher.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _watcher.discard(self)

    def attach(self, response: Any) -> None:
        """The HTTP response (``httpx2.Response``) whose socket a cancel shuts down."""
        with self._lock:
            self._response = response
        if self.fired.is_set():
            self._abort()

    def check(self) -> None:
        if self.fired.is_set():
            raise LLMCancelled("the call was cancelled in flight")

    def raised(self, exc: BaseException) -> None:
        """An error from the stream: a cancellation if the watch fired (the shut socket)."""
        if self.fired.is_set():
            raise LLMCancelled("the call was cancelled in flight") from exc

    def fire(self) -> None:
        self.fired.set()
        self._abort()

    def _abort(self) -> None:
        with self._lock:
            response = self._response
        if response is None:
            return  # no response yet: the caller checks ``fired`` when it comes
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed
            pass


def streamed_call(
    context: CallContext,
    create: Callable[[], Any],
    whole: Callable[[bytes], LLMResponse],
    streamed: Callable[[Any, CancelWatch], LLMResponse],
) -> LLMResponse:
    """One provider call in streaming mode, cancellable: ``create()`` opens the SDK's
    stream; a server that answers with a whole JSON body instead of an event stream is
    read by ``whole``; otherwise ``streamed(stream, watch)`` reads the events. A cancel
    (``context.cancelled``) closes the response and raises ``LLMCancelled``."""
    with CancelWatch(context.cancelled) as watch:
        stream = create()
        try:
            watch.attach(stream.response)
            watch.check()
            if "text/event-stream" not in stream.response.headers.get("content-type", ""):
                return whole(stream.response.read())
            return streamed(stream, watch)
        except LLMCancelled:
            raise
        except Exception as exc:
            watch.raised(exc)
            raise
        finally:
            stream.close()


class _Watcher:
    """One daemon thread per process polls every call in flight, so the checks (which
    may read the database) share one connection instead of opening one per call; the
    thread closes its connection whenever no call is in flight."""

    def __init__(self) -> None:
        self._watches: set[CancelWatch] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watch: CancelWatch) -> None:
        with self._changed:
            self._watches.add(watch)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="llm-cancel-watch", daemon=True)
                self._thread.start()
            self._changed.notify()

    def discard(self, watch: CancelWatch) -> None:
        with self._changed:
            self._watches.discard(watch)

    def _run(self) -> None:
        from django.db import connections

        while True:
            with self._changed:
                if not self._watches:
                    connections.close_all()  # this thread's own: none held while idle
                    self._changed.wait()
                watches = [w for w in self._watches if not w.fired.is_set()]
            for watch in watches:
                try:
                    if watch.cancelled():
                        watch.fire()
                except Exception:  # a failing check must not kill the call: ask again
                    log.warning("llm: the cancellation check failed", exc_info=True)
                    connections.close_all()  # a broken connection is opened anew
            time.sleep(CANCEL_POLL_S)


_watcher = _Watcher()


class Provider:
    name = "base"
    #: Whether a call is answered in this process without waiting on anything (no
    #: network, no sleep): the loop then keeps no lease-renewing thread during it.
    local = False
    #: Whether this provider can act as the LLM interrupt judge.
    judges = False

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        raise NotImplementedError

    #: Whether this provider can run the mini triage (seed section 21): rounds of
    #: read-only tools through ``complete`` in the ``triage`` scenario, then a JSON answer.
    triages = False

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        """One word: continue / preempt / cancel / merge / defer."""
        return "continue"


_override: Provider | None = None


def set_provider_override(provider: Provider | None) -> None:
    """Tests install a scripted provider for the worker threads of this process."""
    global _override
    _override = provider


# Providers built from the settings, one per process for each distinct configuration:
# building one (an SDK client with its connection pool) per call cost more than the
# call to the offline brain, and on every mind-view render.
_built: dict[tuple[str, ...], Provider] = {}
_built_lock = threading.Lock()


def _configuration() -> tuple[str, ...]:
    m = settings.MARKUS
    return (
        str(m["LLM_PROVIDER"]),
        str(m["LLM_MODEL"] or ""),
        str(m["LLM_BASE_URL"] or ""),
        str(m["LLM_API_KEY"] or ""),
    )


def _build(name: str, model: str, base_url: str, api_key: str) -> Provider:
    if name == "offline":
        from .offline import OfflineProvider

        return OfflineProvider()
    if name == "openai":
        from .openai_provider import OpenAIProvider

        return OpenAIProvider(model=model or "gpt-4o-mini", base_url=base_url or None, api_key=api_key or "unset")
    if name == "anthropic":
        from .anthropic_provider import DEFAULT_MODEL, AnthropicProvider

        return AnthropicProvider(model=model or DEFAULT_MODEL, base_url=base_url or None, api_key=api_key or "unset")
    raise ValueError(f"unknown MARKUS_LLM_PROVIDER {name!r} (offline, openai, anthropic)")


def get_provider(*, model: str | None = None) -> Provider:
    """The configured provider: built once per process for its settings (provider,
    model, base URL, key) and shared by every thread; a change of those settings builds
    a new one. ``model``: this call's model instead of the configured one (the cheaper
    ``MARKUS_TRIAGE_MODEL`` of a triage or a deliberation). A test's override wins."""
    if _override is not None:
        return _override
    key = _configuration()
    if model:
        key = (key[0], model, *key[2:])
    provider = _built.get(key)
    if provider is None:
        with _built_lock:
            provider = _built.get(key)
            if provider is None:
                if len(_built) >= 16:  # settings changed many times (tests): drop the old ones
                    _built.clear()
                provider = _built[key] = _build(*key)
    return provider
