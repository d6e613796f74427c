"""A slow OpenAI-compatible chat-completions server for the fault suite, so the workers
run the real ``openai`` SDK path (MARKUS_LLM_PROVIDER=openai) and every item takes a
while, long enough for a fault to land in the middle of one.

It plays a diligent agent: a task execution submits its task for review, a review
completes the task, everything else answers with the completion marker. The interrupt
judge always says "continue"; a deliberation (a call that offers
``complete_deliberation``) completes at once with the first item listed, and the mini
triage answers its JSON with the first candidate. Judge, deliberation and triage calls
answer after ``quick`` seconds (a deliberation after ``deliberate_s``); a working turn
thinks for ``think`` seconds (uniform). ``calls`` counts each kind; ``decisions`` keeps
every deliberation's arguments.

It answers a whole JSON completion, also when the request asks for a stream (the
``openai`` provider always does, and reads a whole answer as one). With ``stream_reply``
set (``stream_chats``), a working turn's plain answer is that text instead, streamed when
the request asks (``"stream": true``): ``chat.completion.chunk`` events of a few words,
``piece_s`` apart, the finish reason in the last, then the usage (when
``stream_options.include_usage`` asks) and ``data: [DONE]``; ``streamed`` counts them.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from markus.llm.base import without_context

TASK_ID = re.compile(r"\btsk_[0-9a-f]+\b")
# The queue as deliberation (its first user message) and the mini triage list it.
LISTED = re.compile(r"^- (\S+) \[priority (\d+)\] (\w+)", re.M)
TRIAGE_ASKS = "Answer with JSON only"
# The scenario instructions (attention.scenarios) the stub recognises in the system prompt.
EXECUTE = "Do the task you are assigned."
REVIEW = "You were asked to review a task."
# A chat that asks for one side-effecting call: ``EFFECT <tool> <marker> [<target>]``
# (the target: a task id or a colleague). The turn that sees the ask makes the call with
# the marker in its arguments (a fresh call id each time it is asked, as a real model's;
# follow-ups merged into the chat are asked for together), the turn after the results
# answers.
EFFECT = re.compile(r"EFFECT (\w+) (mkr-[\w-]+)(?: (\S+))?")


def effect_arguments(tool: str, marker: str, target: str) -> dict[str, Any]:
    """The arguments of an effect's call, the marker in the text it leaves behind."""
    return {
        "task_comment": {"task_id": target, "content": f"comment {marker}"},
        "agent_send_message": {"to": target, "text": f"message {marker}"},
        "memory_save": {"content": f"note {marker}"},
        "notify_user": {"title": "fyi", "body": f"notice {marker}"},
        "agent_delegate_task": {"to": target, "title": f"delegated {marker}", "description": "Do it."},
        "schedule_reminder": {"text": f"reminder {marker}", "when": "in 2h"},
        # The MCP test server's effect (tests/toolservers/counter_server.py), long enough
        # for a worker to be killed while it runs.
        "counter__increment": {"marker": marker, "seconds": 3},
    }[tool]


class SlowLLM:
    def __init__(
        self,
        *,
        think: tuple[float, float] = (0.25, 0.6),
        quick: float = 0.02,
        deliberate_s: float | None = None,
        batch: bool = False,
        seed: int = 7,
    ) -> None:
        self.think = think
        self.quick = quick
        self.deliberate_s = quick if deliberate_s is None else deliberate_s
        self.batch = batch  # a deliberation batches every other listed system event with its pick
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.calls = {"work": 0, "judge": 0, "triage": 0, "deliberation": 0, "effect": 0}
        self.decisions: list[dict[str, Any]] = []
        self.stream_reply: str | None = None  # off: every answer whole, as before
        self.piece_s = 0.0
        self.streamed = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                message, finish = stub.answer(body)
                if message.pop("_stream", False) and body.get("stream"):
                    self.stream(body, message, finish)
                    return
                data = json.dumps(
                    {
                        "id": "chatcmpl-faults",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "stub"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
                    }
                ).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the caller was killed
                    pass

            def stream(self, body: dict[str, Any], message: dict[str, Any], finish: str) -> None:
                """The answer as an event stream (HTTP/1.0: the body ends when the connection closes)."""
                head = {"id": "chatcmpl-faults", "object": "chat.completion.chunk", "created": int(time.time())}
                head["model"] = body.get("model", "stub")
                words = re.findall(r"\s*\S+\s*", str(message.get("content") or ""))
                pieces = ["".join(words[i : i + 2]) for i in range(0, len(words), 2)]
                chunks = [
                    {
                        **head,
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": p}, "finish_reason": None}],
                    }
                    for p in pieces
                ]
                chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {"prompt_tokens": 40, "completion_tokens": len(pieces), "total_tokens": 40 + len(pieces)}
                    chunks.append({**head, "choices": [], "usage": usage})
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    for n, chunk in enumerate(chunks):
                        if n and n < len(pieces):
                            time.sleep(stub.piece_s)
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    with stub.lock:
                        stub.streamed += 1
                except (BrokenPipeError, ConnectionResetError):  # the caller was killed
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, name="faults-llm", daemon=True)

    def start(self) -> SlowLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def stream_chats(self, reply: str, piece_s: float) -> None:
        """From now on a working turn's plain answer is ``reply``, streamed when asked."""
        self.stream_reply, self.piece_s = reply, piece_s

    def _count(self, kind: str) -> None:
        with self.lock:
            self.calls[kind] += 1

    def _pause(self) -> None:
        with self.lock:
            delay = self.random.uniform(*self.think)
        time.sleep(delay)

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        # The loop's context note lists the other waiting items (their asks too): not this one's.
        messages = without_context(body.get("messages") or [])
        if body.get("max_tokens") == 3:  # the interrupt judge
            self._count("judge")
            time.sleep(self.quick)
            return {"role": "assistant", "content": "continue"}, "stop"
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        if "complete_deliberation" in tools:
            return self.deliberate(users[0] if users else "")
        if users and TRIAGE_ASKS in users[0]:  # the mini triage: the first candidate
            self._count("triage")
            time.sleep(self.quick)
            listed = LISTED.findall(users[0])
            answer = {"processItemId": listed[0][0] if listed else "", "deferItemIds": [], "dropItemIds": []}
            return {"role": "assistant", "content": json.dumps({**answer, "reasoning": "first listed"})}, "stop"
        self._count("work")
        self._pause()
        system = str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""
        first_user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        effect = self.effect(messages, tools)
        if effect is not None:
            return effect
        task = TASK_ID.search(first_user)
        if task and messages and messages[-1].get("role") == "user":
            call = None
            if EXECUTE in system and "task_submit_review" in tools:
                call = ("task_submit_review", {"task_id": task.group(0), "summary": "done as asked"})
            elif REVIEW in system and "task_update" in tools:
                call = ("task_update", {"task_id": task.group(0), "status": "completed"})
            if call is not None:
                tool_call = {
                    "id": f"call_{int(time.time() * 1e6)}",
                    "type": "function",
                    "function": {"name": call[0], "arguments": json.dumps(call[1])},
                }
                return {"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"
        if self.stream_reply is not None:
            return {"role": "assistant", "content": self.stream_reply, "_stream": True}, "stop"
        return {"role": "assistant", "content": "Handled it."}, "stop"

    def effect(self, messages: list[dict[str, Any]], tools: set[str]) -> tuple[dict[str, Any], str] | None:
        """A chat asking for effects: one call for every ask (a person's message naming
        an effect) that neither a tool result nor an answer follows yet (follow-ups merged
        into the chat ask too, several at once), then the answer."""
        asks = [i for i, m in enumerate(messages) if m.get("role") == "user" and EFFECT.search(str(m.get("content")))]
        if not asks:
            return None
        # Asked before: answered by a tool result, or by an answer (the chat's history).
        answered = max(
            (
                i
                for i, m in enumerate(messages)
                if m.get("role") == "tool" or (m.get("role") == "assistant" and not m.get("tool_calls"))
            ),
            default=-1,
        )
        pending = [i for i in asks if i > answered]
        if not pending:
            return {"role": "assistant", "content": "Done as you asked."}, "stop"
        calls = []
        for i in pending:
            match = EFFECT.search(str(messages[i].get("content")))
            assert match is not None
            tool, marker, target = match.group(1), match.group(2), match.group(3) or ""
            if tool not in tools:
                return {"role": "assistant", "content": f"I cannot use {tool} here."}, "stop"
            self._count("effect")
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(effect_arguments(tool, marker, target))},
                }
            )
        return {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"

    def deliberate(self, queue: str) -> tuple[dict[str, Any], str]:
        """complete_deliberation with the first item listed (and, with ``batch``, every
        other listed system event as its batch)."""
        self._count("deliberation")
        time.sleep(self.deliberate_s)
        listed = LISTED.findall(queue)
        if not listed:
            return {"role": "assistant", "content": "Nothing to decide."}, "stop"
        batch = [i for i, _, kind in listed[1:] if kind == "system_event"] if self.batch else []
        args = {
            "process_item_id": listed[0][0],
            "batch_item_ids": batch,
            "reasoning": "the oldest first" + (", the other system events with it" if batch else ""),
            "situational_awareness": f"{len(listed)} item(s) waited",
        }
        with self.lock:
            self.decisions.append(args)
        call = {
            "id": f"call_{int(time.time() * 1e6)}",
            "type": "function",
            "function": {"name": "complete_deliberation", "arguments": json.dumps(args)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
