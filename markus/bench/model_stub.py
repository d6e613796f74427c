"""A local model for ``bench attention``: a small server speaking the OpenAI
chat-completions wire format, so a burst runs through the real ``openai`` SDK path (the
provider, its client, the HTTP round trip) without a model's own time, and counts its
calls by kind.

It tells the calls apart by what they offer: a deliberation (``complete_deliberation``
among the tools: it chooses the first item listed), the mini triage (its system prompt:
it answers JSON for the first candidate), or an item's own run (done at once, with the
plain final answer). It answers whole completions, which the provider reads like a stream.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28}
LISTED = re.compile(r"^- (\S+) \[priority", re.M)
KINDS = ("deliberation", "triage", "item")


def answer(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The kind of call and the assistant message that answers it."""
    tools = {t["function"]["name"] for t in body.get("tools") or []}
    messages = body.get("messages") or []
    system = str(messages[0].get("content") or "") if messages else ""
    first = str(messages[1].get("content") or "") if len(messages) > 1 else ""
    listed = LISTED.findall(first)
    if "complete_deliberation" in tools and listed:
        decision = {"process_item_id": listed[0], "reasoning": "the first one listed"}
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": "complete_deliberation", "arguments": json.dumps(decision)},
        }
        return "deliberation", {"role": "assistant", "content": None, "tool_calls": [call]}
    if "decide what to work on next" in system and listed:
        return "triage", {
            "role": "assistant",
            "content": json.dumps({"processItemId": listed[0], "reasoning": "first"}),
        }
    return "item", {"role": "assistant", "content": "done"}


class ModelStub:
    """``with ModelStub() as stub:`` serves at ``stub.url``; ``stub.calls`` counts by kind."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                kind, message = answer(body)
                with lock:
                    stub.calls[kind] += 1
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                data = json.dumps(
                    {
                        "id": "chatcmpl-bench",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", ""),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": USAGE,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ModelStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
