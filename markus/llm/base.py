"""The provider interface: given a system prompt, messages and tool schemas, return text,
tool calls and token usage.

Messages use the OpenAI chat shape (``role`` user / assistant / tool, ``tool_calls`` on
assistant turns, ``tool_call_id`` on tool results), because it is plain JSON and is what
gets persisted in an LLM session.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.conf import settings
from django.utils.module_loading import import_string

log = logging.getLogger(__name__)

#: The first line of the loop's context note (working memory, the mailbox:
#: ``attention.session_messages.context_message``), a message of its own before the request or
#: appended to a tool result: the loop's note, not a person's words. It names no speaker: a
#: mark that began with the platform's name read to a small model as who was talking, and an
#: agent named Ada answered "I am Markus".
CONTEXT_MARK = "[context now; not a message from anyone]"
#: The marks the note had before, still in sessions stored then: found and compared alike,
#: so such a session's note is recognised (and not noted again) when it resumes.
OLD_CONTEXT_MARKS = ("[Markus: your context now; not a message from anyone]",)
CONTEXT_MARKS = (CONTEXT_MARK, *OLD_CONTEXT_MARKS)


def context_at(content: str) -> int:
    """Where the loop's context note begins in a message's content (under its mark or an
    older one), -1 when it has none."""
    found = [at for mark in CONTEXT_MARKS if (at := content.find(mark)) != -1]
    return min(found, default=-1)


def split_at_context(content: str) -> tuple[str, str]:
    """A message's content before the loop's context note, and the note ("" when it has
    none)."""
    at = context_at(content)
    return (content, "") if at == -1 else (content[:at].rstrip(), content[at:])


def without_context(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without the loop's context notes (for brains that read the messages
    by rule: the offline brain, test brains)."""
    kept = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) and context_at(content) != -1:
            content = split_at_context(content)[0]
            if not content and m.get("role") == "user":
                continue
            m = {**m, "content": content}
        kept.append(m)
    return kept


class LLMCancelled(Exception):
    """The in-flight call was cancelled (the agent was stopped or paused)."""


class ProviderError(Exception):
    """The provider did not answer the call: no connection, a timeout, an HTTP error, a
    stream cut short. ``retryable``: the same call may succeed when tried again (the
    seam, ``attention.model_call``, tries it again after a back-off); ``retry_after``:
    the seconds the server asked to wait (a 429's ``Retry-After``)."""

    def __init__(self, message: str, *, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


def cut_short(provider: str) -> ProviderError:
    """A stream that ended without saying why the model stopped: the server died or the
    connection broke mid-answer. Never an empty answer."""
    return ProviderError(f"{provider}: the answer's stream ended without a finish reason (cut short)")


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
    #: ``finish_reason`` values of an answer stopped at a limit, not at its end (``length``
    #: on the OpenAI wire; ``max_tokens`` and ``model_context_window_exceeded`` on Anthropic's).
    CUT_AT_LIMIT: ClassVar[frozenset[str]] = frozenset({"length", "max_tokens", "model_context_window_exceeded"})
    #: ``finish_reason`` of an answer whose stream the provider stopped reading because it
    #: repeated itself (``Repetition``); the text is its first copy, the usage estimated.
    REPEATING: ClassVar[str] = "repeating"
    #: The provider's word that the model refused this answer ("" when it did not): a
    #: safety filter's stop (``content_filter``; ``refusal`` with its category and
    #: explanation) or the model's refusal message. What text came before it is no answer.
    refusal: str = ""

    def __post_init__(self) -> None:
        self.text, self.refusal = storable(self.text), storable(self.refusal)

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

    ``usage``: set by a provider's ``judge`` (which answers one word) to what it spent.

    ``max_tokens`` and ``deadline``: set by the seam (``attention.model_call``) from the
    scenario and the settings; every network provider honours both."""

    scenario: str = ""
    agent_name: str = ""
    item: dict[str, Any] = field(default_factory=dict)
    cancelled: Callable[[], bool] = lambda: False
    on_delta: Callable[[str], None] | None = None
    model: str = ""
    #: What a ``judge`` call spent, set by the provider (``judge`` answers a word only).
    usage: Usage | None = None
    #: The most tokens the answer may have (``max_tokens``); 0: the provider's own.
    max_tokens: int = 0
    #: ``time.monotonic()`` past which the call is given up (a ``ProviderError``); 0: never.
    deadline: float = 0.0

    def emit(self, text: str) -> None:
        if text and self.on_delta is not None:
            self.on_delta(text)


class Repetition:
    """Tells when a streamed answer has fallen into a loop: the same block of lines (one
    to ``LINES`` of them, ``CHARS`` characters or more) written ``TIMES`` times in a row.
    The provider then stops reading, closing the stream (the server stops writing), and
    keeps the answer to the end of its first copy (``kept`` characters). The real small
    model, once its answer looped, wrote one line to its ``max_tokens``: 2,048 tokens in
    274 s, a call written as text over and over."""

    TIMES, LINES, CHARS = 3, 8, 20

    def __init__(self) -> None:
        self.fed = 0  # characters fed so far
        self.line = ""  # the line being written
        self.lines: deque[tuple[str, int]] = deque(maxlen=self.TIMES * self.LINES)  # (line, where it ends)
        self.kept = 0

    def feed(self, piece: str) -> bool:
        """The answer's next piece; True once it repeats itself (``kept`` is set)."""
        start = self.fed - len(self.line)
        self.fed += len(piece)
        if "\n" not in piece:
            self.line += piece
            return False
        *done, self.line = (self.line + piece).split("\n")
        for line in done:
            start += len(line) + 1
            self.lines.append((line.strip(), start))
            if self._looping():
                return True
        return False

    def _looping(self) -> bool:
        lines = [line for line, _ in self.lines]
        for k in range(1, self.LINES + 1):
            if len(lines) < k * self.TIMES:
                break
            block = lines[-k:]
            if sum(map(len, block)) < self.CHARS:
                continue
            if all(lines[len(lines) - k * (i + 1) : len(lines) - k * i] == block for i in range(1, self.TIMES)):
                self.kept = self.lines[len(lines) - k * (self.TIMES - 1) - 1][1]
                return True
        return False


#: Four characters a token: the estimate where a provider did not say (the seam's
#: ``attention.model_call.estimate_tokens``, and what a looping answer wrote).
CHARS_PER_TOKEN = 4


def repeating(text: str, looping: Repetition, prompt_tokens: int = 0) -> LLMResponse:
    """The answer of a stream stopped because it repeated itself: ``text`` is its first
    copy. The server counts the tokens in its last chunk, which never came: what it wrote
    is estimated from all of it (every copy is charged), ``prompt_tokens`` is what the
    server said of the prompt before the answer (0: nothing, the seam estimates it)."""
    written = looping.fed // CHARS_PER_TOKEN
    return LLMResponse(text=text.rstrip(), finish_reason=LLMResponse.REPEATING, usage=Usage(prompt_tokens, written))


def judge_prompt(current: dict[str, Any], new: dict[str, Any]) -> str:
    """The interrupt judge's question (``Provider.judge``): one word, each word said what
    it does, so a model does not guess ("cancel" ends the current work for good)."""
    return (
        "You are working on something and a new message arrived. Answer with exactly one word:\n"
        "continue: keep working; the new message waits its turn (the usual answer)\n"
        "preempt: the new message is more urgent; pause the work and come back to it after\n"
        "merge: the new message adds to the current work (the same sender, the same subject)\n"
        "defer: the new message can wait until the rest of the queue is done\n"
        "cancel: the new message, from whoever asked for the current work, calls it off\n\n"
        f"Current work: {json.dumps(current)[:2000]}\n\nNew message: {json.dumps(new)[:2000]}"
    )


def word_chunks(text: str, words: int = 1) -> list[str]:
    """The text in chunks of ``words`` words (each word with the spaces around it), for
    providers that stream a whole answer piecewise and for a chat's reply that came
    whole; joined they are the text."""
    parts = re.findall(r"\s*\S+\s*", text)
    if not parts:
        return [text] if text else []
    return ["".join(parts[i : i + words]) for i in range(0, len(parts), words)]


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

    def __init__(self, cancelled: Callable[[], bool], deadline: float = 0.0) -> None:
        self.cancelled = cancelled
        self.deadline = deadline
        self.expired = False  # fired because the deadline passed, not by a cancel
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
            raise self._why()

    def raised(self, exc: BaseException) -> None:
        """An error from the stream: a cancellation if the watch fired (the shut socket),
        a ``ProviderError`` if the call's deadline passed."""
        if self.fired.is_set():
            raise self._why() from exc

    def _why(self) -> Exception:
        if self.expired:
            return ProviderError("no complete answer within the call's time limit (MARKUS_LLM_CALL_MAX_S)")
        return LLMCancelled("the call was cancelled in flight")

    def due(self) -> bool:
        """Whether the call must end now: cancelled, or past its deadline."""
        if self.deadline and time.monotonic() > self.deadline:
            self.expired = True
            return True
        return self.cancelled()

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
    (``context.cancelled``) closes the response and raises ``LLMCancelled``; past the
    call's ``context.deadline`` it is closed the same way and a ``ProviderError`` raised."""
    with CancelWatch(context.cancelled, context.deadline) as watch:
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
                    if watch.due():
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

    @classmethod
    def configured(cls, *, model: str, base_url: str, api_key: str, timeout: float) -> Provider:
        """The provider as the settings ask for it (empty strings: not set). A provider
        that reads none of them (the offline brain) is built bare."""
        return cls()


# The providers by the name ``MARKUS_LLM_PROVIDER`` gives, as dotted paths (the way Django
# names a backend in settings): this module is what every provider imports, and imports
# none of them.
PROVIDERS = {
    "offline": "markus.llm.offline.OfflineProvider",
    "openai": "markus.llm.openai_provider.OpenAIProvider",
    "anthropic": "markus.llm.anthropic_provider.AnthropicProvider",
}

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
        str(m["LLM_TIMEOUT_S"]),
    )


def _build(name: str, model: str, base_url: str, api_key: str, timeout: str) -> Provider:
    if name not in PROVIDERS:
        raise ValueError(f"unknown MARKUS_LLM_PROVIDER {name!r} ({', '.join(PROVIDERS)})")
    provider: type[Provider] = import_string(PROVIDERS[name])
    return provider.configured(model=model, base_url=base_url, api_key=api_key, timeout=float(timeout))


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


_FENCED = re.compile(r"```(?:json|tool_call)?\s*(\{.*?\})\s*```|<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def written_arguments(found: dict[str, Any]) -> Any:
    """The arguments of a call a model wrote as a JSON object: its ``arguments`` (or
    ``parameters``), else the keys written beside its ``name`` (``{"name": "x", "title":
    …}``, as the real small model wrote them)."""
    if "arguments" in found or "parameters" in found:
        return found.get("arguments", found.get("parameters"))
    return {key: value for key, value in found.items() if key != "name"}


def fenced_tool_calls(text: str, offered: set[str], *, prefix: str) -> tuple[list[ToolCall], str]:
    """The tool calls a model wrote into its answer's text instead of making them (a
    JSON ``{"name": ..., "arguments": {...}}`` in a code fence or a ``<tool_call>`` tag,
    as small models do), for tools in ``offered`` only; and the text without them.
    ``prefix`` makes their call ids (``prefix_0`` ...)."""
    calls: list[ToolCall] = []
    rest: list[str] = []
    at = 0
    for match in _FENCED.finditer(text or ""):
        try:
            found = json.loads(match.group(1) or match.group(2))
        except ValueError:
            continue
        name = found.get("name") if isinstance(found, dict) else None
        args = written_arguments(found) if isinstance(found, dict) else None
        if not isinstance(name, str) or name not in offered or not isinstance(args, dict):
            continue
        calls.append(ToolCall(id=f"{prefix}_{len(calls)}", name=name, arguments=args))
        rest.append(text[at : match.start()])
        at = match.end()
    rest.append((text or "")[at:])
    return calls, "".join(rest).strip() if calls else text


def bare_tool_calls(text: str, offered: set[str], *, prefix: str) -> list[ToolCall]:
    """An answer that is nothing but tool calls written as JSON objects, one after the
    other with no fence or tag (``{"name": ..., "arguments": {...}}``: a small model
    served without a tool-call parser), for tools in ``offered``: the calls. [] when the
    text holds anything else."""
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    at, end = 0, len(text)
    while at < end:
        if text[at].isspace():
            at += 1
            continue
        try:
            found, at = decoder.raw_decode(text, at)
        except ValueError:
            return []
        name = found.get("name") if isinstance(found, dict) else None
        # A name alone is no call here: an object a person may have asked for.
        args = written_arguments(found) if isinstance(found, dict) and len(found) > 1 else None
        if not isinstance(name, str) or name not in offered or not isinstance(args, dict):
            return []
        calls.append(ToolCall(id=f"{prefix}_{len(calls)}", name=name, arguments=args))
    return calls


_CALL_OPENING = re.compile(
    r"\s*(?:```\w*\s*|<tool_call>\s*)?"  # in a fence or a tag, or bare
    r'\{\s*"name"\s*:\s*"(?P<name>[^"\\]+)"\s*(?:(?P<arguments>,\s*"(?:arguments|parameters)")|,)'
)


def written_call(text: str, offered: Container[str]) -> str | None:
    """The tool an answer opens a call of, written as text (``{"name": "x", "arguments":
    …``, or of a tool ``offered`` with its arguments beside its name: ``{"name": "x",
    "title": …``); None when it does not. An answer that is such a call and was not taken
    as one (``fenced_tool_calls``, ``bare_tool_calls``) could not be read (not JSON), or
    calls a tool that is not offered (a small model named one after whom it answered):
    either way it is no answer. A flat object naming no tool here is an answer in JSON."""
    opening = _CALL_OPENING.match(text)
    if opening is None:
        return None
    name = opening["name"]
    return name if opening["arguments"] or name in offered else None


#: HTTP statuses worth trying again besides 5xx (a provider's own, such as Anthropic's
#: 529 "overloaded", is a 5xx already).
RETRY_STATUSES = frozenset({408, 409, 429})


def sdk_errors(sdk: Any) -> tuple[type[Exception], ...]:
    """What a provider SDK (``openai``, ``anthropic``: the same error classes) and its
    HTTP client raise for a call that was not answered."""
    import httpx2

    return (sdk.APIError, httpx2.HTTPError)


#: The errors a stream may end with after its 200 that the same request would meet again
#: (Anthropic's error types; any other, an overload above all, is tried again).
STREAM_ERRORS_FINAL = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large"}
)


def _error_of(body: Any) -> tuple[str, str]:
    """(type, message) of an error's body: ``{"error": {type, message}}`` (an error event,
    Anthropic's answers) or the ``{type, message}`` inside it (the OpenAI SDK's)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "error", str(body or "no message")
    return str(error.get("type") or "error"), str(error.get("message") or "no message")


def provider_error(exc: Exception, sdk: Any) -> ProviderError:
    """An SDK's (or its HTTP client's) error as the seam reads it: what happened, said the
    same way each time (so a repeated failure is told apart from a different one), and
    whether trying again may help (a timeout, no connection, a cut stream, 408, 409, 429,
    5xx; not a request the server refused)."""
    import httpx2

    if isinstance(exc, sdk.APIStatusError) and exc.status_code < 300:  # after a 200: an error event in the stream
        kind, said = _error_of(getattr(exc, "body", None))
        return ProviderError(
            f"an error event in the stream: {kind}: {said}"[:300], retryable=kind not in STREAM_ERRORS_FINAL
        )
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        after = exc.response.headers.get("retry-after") if exc.response is not None else None
        try:
            retry_after = float(after) if after is not None else None
        except ValueError:
            retry_after = None
        retryable = status in RETRY_STATUSES or status >= 500
        said = f"HTTP {status} {type(exc).__name__}"
        # A refusal the same request meets again: its words say why (a context too small …);
        # not an authentication's, which may quote part of the key to whoever reads the reply.
        if not retryable and status not in (401, 403, 407):
            said += f": {_error_of(exc.body)[1]}"
        return ProviderError(said[:300], retryable=retryable, retry_after=retry_after)
    if isinstance(exc, sdk.APITimeoutError | httpx2.TimeoutException):
        return ProviderError("timed out (MARKUS_LLM_TIMEOUT_S): no answer or no next chunk in time")
    if isinstance(exc, sdk.APIConnectionError | httpx2.HTTPError):
        cause = exc.__cause__ or exc
        if isinstance(cause, httpx2.RemoteProtocolError | httpx2.ReadError):
            return ProviderError(
                f"the connection closed before the answer was complete (cut short: {type(cause).__name__})"
            )
        return ProviderError(f"connection failed ({type(cause).__name__})")
    return ProviderError(f"{type(exc).__name__}: {exc}"[:300])  # an error event in the stream
