"""A local stub server speaking the Anthropic Messages API wire format, so the real
``anthropic`` SDK code path runs.

A reply is ``{"content": str, "tool_calls": [(name, args)]}``, optionally with its
``"stop"`` reason and ``"stop_details"`` (a refusal's), and ``"delta_usage": False`` for a
``message_delta`` without usage, ``"error_after": n`` for an ``error`` event (of
``"error_type"``, ``overloaded_error`` by default) after n events, ending the stream. Without ``"stream"`` the
answer is one JSON message; with it, server-sent events: ``message_start`` (input
usage), for the text a ``content_block_start`` / word-chunk ``text_delta``s /
``content_block_stop``, for each tool call a ``tool_use`` block whose input arrives as
two ``input_json_delta`` pieces, then ``message_delta`` (stop reason, output usage) and
``message_stop``, ``chunk_delay`` seconds apart, with an optional ``stall`` (seconds)
after ``stall_after`` events (``"whole": True`` answers one JSON message all the same).
``stub.wire`` records what was written and when, and whether the client closed the
connection."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .wire import Wire, words

INPUT_TOKENS, OUTPUT_TOKENS = 31, 9


def _message(body: dict[str, Any], content: list[dict[str, Any]], stop: str | None, output: int) -> dict[str, Any]:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": output},
    }


def _stop(reply: dict[str, Any]) -> str:
    return reply.get("stop") or ("tool_use" if reply.get("tool_calls") else "end_turn")


def _events(body: dict[str, Any], reply: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    calls = reply.get("tool_calls") or []
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": _message(body, [], None, 1)})
    ]
    index = 0
    if reply.get("content"):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
        )
        events.append(("ping", {"type": "ping"}))
        for w in words(reply["content"]):
            delta = {"type": "text_delta", "text": w}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for i, (name, args) in enumerate(calls, start=index):
        block = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        raw = json.dumps(args)
        for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta: dict[str, Any] = {"stop_reason": _stop(reply), "stop_sequence": None}
    if reply.get("stop_details"):
        delta["stop_details"] = reply["stop_details"]
    ended: dict[str, Any] = {"type": "message_delta", "delta": delta}
    if reply.get("delta_usage", True):  # False: a server that leaves the usage out of it
        ended["usage"] = {"output_tokens": OUTPUT_TOKENS}
    events.append(("message_delta", ended))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class StubAnthropic:
    def __init__(self, replies: list[dict]):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.wire = Wire()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        # the key, as x-api-key or (this SDK's way) a bearer token
                        "key": self.headers.get("x-api-key")
                        or (self.headers.get("Authorization") or "").removeprefix("Bearer "),
                        "version": self.headers.get("anthropic-version"),
                    }
                )
                reply = stub.replies.pop(0) if stub.replies else {"content": "out of replies"}
                if body.get("stream") and not reply.get("whole"):  # "whole": a server that cannot stream
                    self.stream(body, reply)
                else:
                    self.whole(body, reply)

            def stream(self, body, reply):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                stub.wire.streaming.set()
                for n, (name, data) in enumerate(_events(body, reply)):
                    if n and not stub.wire.wait(self, reply.get("chunk_delay", 0.0)):
                        return
                    if n == reply.get("stall_after") and not stub.wire.wait(self, reply.get("stall", 0.0)):
                        return
                    if n == reply.get("error_after"):  # an error event after a 200, and the stream ends
                        error = {"type": reply.get("error_type", "overloaded_error"), "message": "Overloaded"}
                        stub.wire.send(
                            self, f"event: error\ndata: {json.dumps({'type': 'error', 'error': error})}\n\n".encode()
                        )
                        return
                    if not stub.wire.send(self, f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()):
                        return
                stub.wire.finished.set()

            def whole(self, body, reply):
                content: list[dict[str, Any]] = []
                if reply.get("content"):
                    content.append({"type": "text", "text": reply["content"]})
                for i, (name, args) in enumerate(reply.get("tool_calls") or [], start=len(content)):
                    content.append({"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args})
                message = _message(body, content, _stop(reply), OUTPUT_TOKENS)
                if reply.get("stop_details"):
                    message["stop_details"] = reply["stop_details"]
                data = json.dumps(message).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                stub.wire.send(self, data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.wire.shutdown.set()
        self.server.shutdown()
        self.server.server_close()
