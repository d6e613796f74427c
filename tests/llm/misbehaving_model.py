"""A local OpenAI-compatible chat-completions server that misbehaves on purpose, for
the tests of what the product does with a model that is slow, stalls, dies mid-stream,
never stops, repeats or invents tool calls, hides a call in a code fence, says nothing
or answers with an HTTP error. It is a real HTTP server on 127.0.0.1 (port 0), so the
real ``openai`` SDK and its httpx2 client run (respx does not intercept httpx2)::

    with MisbehavingModel([call("ghost_tool", {}), answer("done")]) as model:
        client = openai.OpenAI(base_url=model.url, api_key="x", max_retries=0)
        ...
    model.requests[0].body["messages"], model.calls

The script
----------
``script`` chooses what each request gets: a callable ``(body, n) -> Behaviour`` (the
request's JSON body and its 0-based number), a list of behaviours taken in turn (the
last one repeats) or a single behaviour (every request gets it). A script that raises
gets its request an HTTP 500, and the exception is kept in ``model.errors``.

Behaviours (frozen dataclasses, made by the module's functions):

- ``answer(text, chunk_delay=0.0)``: a normal answer, finish_reason ``"stop"``.
- ``call(name, args)`` / ``calls([(name, args), ...], text="")``: tool calls, finish
  ``"tool_calls"``; each call streams as its header (id ``call_<n>_<i>``, name) and its
  arguments in two pieces, so the SDK's consumer must assemble them. ``args`` is a dict,
  or a string sent as it is (malformed arguments); ``as_object=True`` sends a dict as a JSON
  object in one piece, not a string, as some servers do. Any name: an invented tool is just a
  name the request did not offer; a repeated refused call is a script returning the
  same ``call`` every time.
- ``fenced_call(name, args)``: what small models do: the call written as text,
  ```` ```json\\n{"name": ..., "arguments": {...}}\\n``` ````, no ``tool_calls``,
  finish ``"stop"``.
- ``empty()``: content ``""``, finish ``"stop"``.
- ``refuse(text="", refusal="", finish="content_filter")``: what a provider's safety
  filter does: ``text`` (the answer so far), then, if given, ``refusal`` (the model's
  refusal, the message's ``refusal`` field), and finish ``finish`` (``"stop"`` with a
  refusal message, as structured outputs answer).
- ``ramble(chunk="bla ", limit=None, chunk_delay=0.0)``: ``chunk`` over and over until it
  has sent the request's ``max_completion_tokens`` (or ``max_tokens``) chunks, or, when
  the request names neither, ``limit`` chunks (default 2000); then finish ``"length"``.
- ``http_error(status, message, type=None, retry_after=None)``: an OpenAI-style error
  body ``{"error": {"message", "type", "param", "code"}}`` with that status (the SDK
  raises ``openai.InternalServerError`` for a 5xx, ``openai.RateLimitError`` for 429);
  a 429 carries ``Retry-After: 0`` unless told otherwise.
- ``delay_first_byte(seconds, then=answer("…"))``: sleeps before the status line (no
  header, no byte), then does ``then`` (any behaviour, an ``http_error`` too).
- ``stall(after_chunks, seconds, then=answer("…"))``: streams ``then`` but, once
  ``after_chunks`` events are out, goes silent for ``seconds`` before the rest.
- ``cut(after_chunks, then=answer("…"), how="close")``: streams ``then`` and, once
  ``after_chunks`` events are out, the server dies: no finish_reason chunk, no usage, no
  ``data: [DONE]``. ``how``: ``"close"`` closes the connection in the middle of the
  chunked body (a dying server or proxy); ``"reset"`` sends a TCP reset; ``"clean"``
  sends the stream without chunked framing, so the connection's close is a valid end of
  the HTTP body and only the SSE stream is unfinished.
- ``stream_error(after_chunks, message, then=answer("…"))``: after ``after_chunks``
  events, an in-stream ``data: {"error": {...}}`` event (as some gateways send), and the
  stream ends.
- ``whole(then)``: the reply as one JSON ``chat.completion`` even to a request that asked
  for a stream (a server that cannot stream: the SDK's stream then yields no chunk at
  all); a request without ``"stream": true`` gets a whole reply anyway.

Wrappers nest: ``delay_first_byte(1, stall(2, 3, cut(5, ramble())))``. "Events" are the
SSE ``data:`` events written: the first is the role chunk (``{"role": "assistant",
"content": ""}``), then one per content or tool-call piece, then the finish chunk, the
usage chunk (only when the request's ``stream_options.include_usage`` asks for it) and
``[DONE]``; ``chunk_delay`` pauses before each event after the first.

Usage: ``prompt_tokens`` is ``prompt_tokens(body)`` = ``len(json.dumps(messages + tools))
// 4`` (deterministic, so a test can check that prompt tokens are reported);
``completion_tokens`` is the number of content and tool-call pieces sent.

What the SDK sees (openai 3.x over httpx2, checked by test_misbehaving_model.py)
-----------------------------------------------------------------------------------
- A ``cut`` stream (``"close"`` or ``"reset"``): the chunks sent arrive, then iterating
  the stream raises ``openai.APIConnectionError`` (not its subclass ``APITimeoutError``)
  whose ``__cause__`` is ``httpx2.RemoteProtocolError`` (``"close"``) or an httpx2
  transport error (``"reset"``). No chunk has a finish_reason.
- A ``cut(how="clean")`` stream: the chunks sent arrive and iteration just stops, with no
  exception, no chunk with a finish_reason and no usage chunk: only the consumer can tell
  the answer is unfinished.
- ``delay_first_byte`` longer than the client's timeout: ``openai.APITimeoutError``; a
  ``stall`` longer than the read timeout: ``openai.APITimeoutError`` from the iteration,
  after the chunks before it arrived.
- ``stream_error``: ``openai.APIError`` with the message, raised from the iteration.

``model.requests``: what arrived (``Received``: ``body``, ``at`` = ``time.monotonic()``,
``path``, ``headers``); ``model.calls``: how many; ``model.disconnects``: how many
replies the client abandoned before their end. All are safe to read from any thread.
Client disconnects are handled quietly. ``__exit__`` stops the server at once, even with
a handler asleep in a delay or a stall (sleeps wait on an event set on exit, and open
connections are shut down)."""

from __future__ import annotations

import json
import re
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, TypeAlias

Args: TypeAlias = "dict[str, Any] | str"


@dataclass(frozen=True)
class Answer:
    text: str
    chunk_delay: float = 0.0


@dataclass(frozen=True)
class ToolCalls:
    calls: tuple[tuple[str, Args], ...]
    text: str = ""
    as_object: bool = False  # the arguments as a JSON object, not a string (some servers)


@dataclass(frozen=True)
class FencedCall:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Empty:
    pass


@dataclass(frozen=True)
class Refuse:
    text: str = ""
    refusal: str = ""
    finish: str = "content_filter"


@dataclass(frozen=True)
class Ramble:
    chunk: str = "bla "
    limit: int | None = None
    chunk_delay: float = 0.0


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str
    type: str | None = None
    retry_after: str | None = None


@dataclass(frozen=True)
class DelayFirstByte:
    seconds: float
    then: Behaviour


@dataclass(frozen=True)
class Stall:
    after_chunks: int
    seconds: float
    then: Behaviour


@dataclass(frozen=True)
class Cut:
    after_chunks: int
    then: Behaviour
    how: Literal["close", "reset", "clean"] = "close"


@dataclass(frozen=True)
class StreamError:
    after_chunks: int
    message: str
    then: Behaviour


@dataclass(frozen=True)
class Whole:
    then: Behaviour


Behaviour: TypeAlias = (
    "Answer | ToolCalls | FencedCall | Empty | Refuse | Ramble | HttpError | DelayFirstByte | Stall | Cut | StreamError"
    " | Whole"
)
Script: TypeAlias = "Callable[[dict[str, Any], int], Behaviour] | Sequence[Behaviour] | Behaviour"

UNFINISHED = "this answer was going to be a long one but it never gets to its end"
RAMBLE_CAP = 2000


def answer(text: str, chunk_delay: float = 0.0) -> Answer:
    return Answer(text, chunk_delay)


def call(name: str, args: Args | None = None) -> ToolCalls:
    return ToolCalls(((name, {} if args is None else args),))


def calls(pairs: Sequence[tuple[str, Args]], text: str = "", as_object: bool = False) -> ToolCalls:
    return ToolCalls(tuple((name, args) for name, args in pairs), text, as_object)


def fenced_call(name: str, args: dict[str, Any] | None = None) -> FencedCall:
    return FencedCall(name, {} if args is None else args)


def empty() -> Empty:
    return Empty()


def refuse(text: str = "", refusal: str = "", finish: str = "content_filter") -> Refuse:
    return Refuse(text, refusal, finish)


def ramble(chunk: str = "bla ", limit: int | None = None, chunk_delay: float = 0.0) -> Ramble:
    return Ramble(chunk, limit, chunk_delay)


def http_error(status: int, message: str = "", type: str | None = None, retry_after: str | None = None) -> HttpError:
    return HttpError(status, message or f"the model server failed with {status}", type, retry_after)


def delay_first_byte(seconds: float, then: Behaviour | None = None) -> DelayFirstByte:
    return DelayFirstByte(seconds, then if then is not None else answer("sorry for the wait"))


def stall(after_chunks: int, seconds: float, then: Behaviour | None = None) -> Stall:
    return Stall(after_chunks, seconds, then if then is not None else answer(UNFINISHED))


def cut(after_chunks: int = 3, then: Behaviour | None = None, how: Literal["close", "reset", "clean"] = "close") -> Cut:
    return Cut(after_chunks, then if then is not None else answer(UNFINISHED), how)


def stream_error(
    after_chunks: int, message: str = "upstream model failed", then: Behaviour | None = None
) -> StreamError:
    return StreamError(after_chunks, message, then if then is not None else answer(UNFINISHED))


def whole(then: Behaviour) -> Whole:
    return Whole(then)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The deterministic prompt-token estimate every reply reports."""
    return len(json.dumps(list(body.get("messages") or []) + list(body.get("tools") or []))) // 4


def pieces(text: str) -> list[str]:
    """The text in word pieces (spaces and newlines kept); joined they are the text."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    at: float  # time.monotonic() when the request's body had arrived
    path: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Plan:
    """A behaviour with its wrappers taken off."""

    base: Behaviour
    first_byte_delay: float = 0.0
    stalls: dict[int, float] = field(default_factory=dict)
    cut_at: int | None = None
    how: str = "close"
    error_at: int | None = None
    error: str = ""
    whole: bool = False

    @classmethod
    def of(cls, behaviour: Behaviour) -> _Plan:
        plan = cls(behaviour)
        b = behaviour
        while True:
            if isinstance(b, DelayFirstByte):
                plan.first_byte_delay += b.seconds
            elif isinstance(b, Stall):
                plan.stalls[b.after_chunks] = plan.stalls.get(b.after_chunks, 0.0) + b.seconds
            elif isinstance(b, Cut):
                plan.cut_at, plan.how = b.after_chunks, b.how
            elif isinstance(b, StreamError):
                plan.error_at, plan.error = b.after_chunks, b.message
            elif isinstance(b, Whole):
                plan.whole = True
            else:
                plan.base = b
                return plan
            b = b.then


def _pieces_of(b: Behaviour, body: dict[str, Any], n: int) -> Iterator[tuple[dict[str, Any], str | None]]:
    """The deltas of a reply after the role chunk: (delta, finish_reason); the last one
    carries the finish reason."""
    if isinstance(b, Answer | Empty | FencedCall):
        if isinstance(b, Answer):
            text = b.text
        elif isinstance(b, FencedCall):
            text = "```json\n" + json.dumps({"name": b.name, "arguments": b.args}) + "\n```"
        else:
            text = ""
        for piece in pieces(text):
            yield {"content": piece}, None
        yield {}, "stop"
    elif isinstance(b, ToolCalls):
        for piece in pieces(b.text):
            yield {"content": piece}, None
        for i, (name, args) in enumerate(b.calls):
            raw = args if isinstance(args, str) else json.dumps(args)
            head = {"index": i, "id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": ""}}
            if b.as_object:  # whole, in the call's first piece
                yield {"tool_calls": [{**head, "function": {"name": name, "arguments": args}}]}, None
                continue
            yield {"tool_calls": [head]}, None
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                yield {"tool_calls": [{"index": i, "function": {"arguments": part}}]}, None
        yield {}, "tool_calls"
    elif isinstance(b, Refuse):
        for piece in pieces(b.text):
            yield {"content": piece}, None
        if b.refusal:
            yield {"refusal": b.refusal}, None
        yield {}, b.finish
    elif isinstance(b, Ramble):
        cap = body.get("max_completion_tokens") or body.get("max_tokens") or b.limit or RAMBLE_CAP
        for _ in range(int(cap)):
            yield {"content": b.chunk}, None
        yield {}, "length"
    else:
        raise TypeError(f"not a streamable behaviour: {b!r}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # never wait for a handler on close: it may be asleep

    def __init__(self, model: MisbehavingModel) -> None:
        self.model = model
        super().__init__(("127.0.0.1", 0), _Handler)

    def shutdown_request(self, request: Any) -> None:
        if self.model._to_reset(request):
            self.close_request(request)  # SO_LINGER 0: the close sends a reset, no FIN first
        else:
            super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # the client went away: nothing to tell
            return
        super().handle_error(request, client_address)


class _Gone(Exception):
    """The client closed the connection, or the server is going away."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.model._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.server.model._closed(self.connection)

    def do_POST(self) -> None:
        model = self.server.model
        self.close_connection = True
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        n, behaviour = model._arrived(self.path, body, dict(self.headers.items()))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            behaviour = http_error(404, f"no such route: {self.path}", "invalid_request_error")
        plan = _Plan.of(behaviour)
        try:
            self.pause(plan.first_byte_delay)
            if isinstance(plan.base, HttpError):
                self.error(plan.base)
            elif body.get("stream") and not plan.whole:
                self.stream(body, n, plan)
            else:
                self.whole(body, n, plan)
        except (_Gone, OSError):
            model._abandoned()

    # -- the wire

    def write(self, data: bytes) -> None:
        if self.server.model._closing.is_set():
            raise _Gone
        self.wfile.write(data)
        self.wfile.flush()

    def pause(self, seconds: float) -> None:
        """Sleep, but wake for the server's exit or the client's leaving (a readable
        socket with nothing to read: the client sends nothing after its request)."""
        closing = self.server.model._closing
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if closing.is_set():
                raise _Gone
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
            if readable:
                try:
                    gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    raise _Gone

    def die(self, how: str) -> None:
        """Drop the connection where it is."""
        if how == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.server.model._mark_reset(self.connection)
        self.close_connection = True

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()

    # -- the replies

    def error(self, e: HttpError) -> None:
        kind = e.type or (
            "rate_limit_exceeded"
            if e.status == 429
            else "server_error"
            if e.status >= 500
            else "authentication_error"
            if e.status in (401, 403)
            else "invalid_request_error"
        )
        data = json.dumps({"error": {"message": e.message, "type": kind, "param": None, "code": None}}).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        retry_after = e.retry_after if e.retry_after is not None else ("0" if e.status == 429 else None)
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        self.head(e.status, headers)
        self.write(data)

    def chunks(self, body: dict[str, Any], n: int, plan: _Plan, tokens: list[int]) -> Iterator[dict[str, Any]]:
        model = body.get("model") or "misbehaving-model"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": f"chatcmpl-misbehaving-{n}",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        for delta, finish in _pieces_of(plan.base, body, n):
            if delta:
                tokens[0] += 1
            yield chunk(delta, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**chunk({}), "choices": [], "usage": self.usage(body, tokens[0])}

    @staticmethod
    def usage(body: dict[str, Any], completion: int) -> dict[str, int]:
        prompt = prompt_tokens(body)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def stream(self, body: dict[str, Any], n: int, plan: _Plan) -> None:
        chunked = not (plan.cut_at is not None and plan.how == "clean")
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
        self.head(200, headers)

        def send(data: bytes) -> None:
            self.write(b"%X\r\n%s\r\n" % (len(data), data) if chunked else data)

        delay = getattr(plan.base, "chunk_delay", 0.0)
        events = (f"data: {json.dumps(c)}\n\n".encode() for c in self.chunks(body, n, plan, [0]))
        for sent, event in enumerate(_with_done(events)):
            if sent in plan.stalls:
                self.pause(plan.stalls[sent])
            if sent == plan.cut_at:
                return self.die(plan.how)
            if sent == plan.error_at:
                message = {"error": {"message": plan.error, "type": "server_error", "param": None, "code": None}}
                send(f"data: {json.dumps(message)}\n\n".encode())
                break
            if sent and delay:
                self.pause(delay)
            send(event)
        if chunked:
            self.write(b"0\r\n\r\n")

    def whole(self, body: dict[str, Any], n: int, plan: _Plan) -> None:
        tokens = [0]
        content, refusal, finish = "", "", "stop"
        tool_calls: dict[int, dict[str, Any]] = {}
        for c in self.chunks({**body, "stream_options": None}, n, plan, tokens):
            choice = c["choices"][0]
            delta = choice["delta"]
            content += delta.get("content") or ""
            refusal += delta.get("refusal") or ""
            for tc in delta.get("tool_calls") or []:
                slot = tool_calls.setdefault(tc["index"], {"id": "", "type": "function", "function": {}})
                slot["id"] = tc.get("id") or slot["id"]
                fn = slot["function"]
                for key, value in tc.get("function", {}).items():
                    fn[key] = value if isinstance(value, dict) else fn.get(key, "") + value
            finish = choice["finish_reason"] or finish
        message: dict[str, Any] = {"role": "assistant", "content": content if content or not tool_calls else None}
        if tool_calls:
            message["tool_calls"] = [tool_calls[i] for i in sorted(tool_calls)]
        if refusal:
            message["refusal"] = refusal
        data = json.dumps(
            {
                "id": f"chatcmpl-misbehaving-{n}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model") or "misbehaving-model",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": self.usage(body, tokens[0]),
            }
        ).encode()
        self.head(200, {"Content-Type": "application/json", "Content-Length": str(len(data))})
        self.pause(sum(plan.stalls.values()))
        if plan.cut_at is not None:  # half the body, then gone
            self.write(data[: len(data) // 2])
            return self.die(plan.how)
        self.write(data)


def _with_done(events: Iterator[bytes]) -> Iterator[bytes]:
    yield from events
    yield b"data: [DONE]\n\n"


class MisbehavingModel:
    """The server; see the module's docstring. ``url`` is the base URL for the SDK."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._requests: list[Received] = []
        self._disconnects = 0
        self._errors: list[BaseException] = []
        self._closing = threading.Event()
        self._open: set[socket.socket] = set()
        self._resets: set[socket.socket] = set()
        self.server = _Server(self)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    # -- what tests read

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._requests)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def disconnects(self) -> int:
        with self._lock:
            return self._disconnects

    @property
    def errors(self) -> list[BaseException]:
        with self._lock:
            return list(self._errors)

    # -- the handlers' bookkeeping

    def _arrived(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Behaviour]:
        with self._lock:
            n = len(self._requests)
            self._requests.append(Received(body, time.monotonic(), path, headers))
        try:
            return n, self._choose(body, n)
        except Exception as exc:
            with self._lock:
                self._errors.append(exc)
            return n, http_error(500, f"the misbehaving model's script failed: {exc!r}")

    def _choose(self, body: dict[str, Any], n: int) -> Behaviour:
        script = self.script
        if callable(script):
            return script(body, n)
        if isinstance(script, Sequence):
            if not script:
                raise ValueError("an empty script")
            return script[min(n, len(script) - 1)]
        return script

    def _abandoned(self) -> None:
        with self._lock:
            self._disconnects += 1

    def _opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)

    def _mark_reset(self, sock: socket.socket) -> None:
        with self._lock:
            self._resets.add(sock)

    def _to_reset(self, sock: socket.socket) -> bool:
        with self._lock:
            if sock in self._resets:
                self._resets.discard(sock)
                return True
            return False

    # -- the context manager

    def __enter__(self) -> MisbehavingModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        with self._lock:
            still_open = list(self._open)
        for sock in still_open:  # wake a handler blocked on a write to a client that no longer reads
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=1)
