"""A local stub server speaking the OpenAI chat-completions wire format, so the real
`openai` SDK code path runs (its HTTP client is httpx2, which respx cannot intercept).

A reply is ``{"content": str, "tool_calls": [(name, args)]}``; a request with
``"stream": true`` gets it as server-sent events (the text in word chunks, each tool
call as its header and its arguments in two pieces, usage in a last chunk when the
request asks for it, then ``[DONE]``), ``chunk_delay`` seconds apart, with an optional
``stall`` (seconds) after ``stall_after`` chunks (``"whole": True`` answers one JSON
completion all the same). ``stub.wire`` records what was
written and when, and whether the client closed the connection."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .wire import Wire, words

USAGE = {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}


def _sse_chunks(body: dict[str, Any], reply: dict[str, Any], usage: dict[str, Any] = USAGE) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": w}) for w in words(reply.get("content") or "")]
    for i, (name, args) in enumerate(reply.get("tool_calls") or []):
        raw = json.dumps(args)
        head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if reply.get("tool_calls") else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**chunk({}), "choices": [], "usage": usage})
    return chunks


class StubOpenAI:
    """``replies`` in turn; or ``chooser``: the request body in, the reply out (a model
    that picks its tool from those offered). ``usage``: what every answer reports used
    (``USAGE``; with ``prompt_tokens_details.cached_tokens`` for a prompt cache's hits)."""

    def __init__(
        self,
        replies: list[dict],
        chooser: Callable[[dict[str, Any]], dict] | None = None,
        usage: dict[str, Any] | None = None,
    ):
        self.replies = list(replies)
        self.chooser = chooser
        self.usage = usage or USAGE
        self.requests: list[dict] = []
        self.wire = Wire()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if stub.chooser is not None:
                    reply = stub.chooser(body)
                else:
                    reply = stub.replies.pop(0) if stub.replies else {"content": "out of replies"}
                if body.get("stream") and not reply.get("whole"):  # "whole": a server that cannot stream
                    self.stream(body, reply)
                else:
                    self.whole(body, reply)

            def stream(self, body, reply):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                stub.wire.streaming.set()
                frames = [f"data: {json.dumps(c)}\n\n".encode() for c in _sse_chunks(body, reply, stub.usage)]
                frames.append(b"data: [DONE]\n\n")
                for n, frame in enumerate(frames):
                    if n and not stub.wire.wait(self, reply.get("chunk_delay", 0.0)):
                        return
                    if n == reply.get("stall_after") and not stub.wire.wait(self, reply.get("stall", 0.0)):
                        return
                    if not stub.wire.send(self, frame):
                        return
                stub.wire.finished.set()

            def whole(self, body, reply):
                message = {"role": "assistant", "content": reply.get("content")}
                if reply.get("tool_calls"):
                    message["tool_calls"] = [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for i, (name, args) in enumerate(reply["tool_calls"])
                    ]
                data = json.dumps(
                    {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                            }
                        ],
                        "usage": stub.usage,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                stub.wire.send(self, data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.wire.shutdown.set()
        self.server.shutdown()
        self.server.server_close()
