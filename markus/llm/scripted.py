"""A scripted provider for tests: a queue of canned turns with optional per-turn delays,
so a test can place an interrupt exactly between two turns.

Every call is recorded (system prompt, messages as sent), so a test can assert what a
resumed session saw.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .base import CallContext, LLMCancelled, LLMResponse, Provider, ToolCall, Usage, word_chunks


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    # Set when the turn starts; a test waits on it to know the call is in flight.
    started: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    # With a listener (``CallContext.on_delta``) the text streams in word chunks, this
    # many seconds apart (the call cancellable between them).
    chunk_delay: float = 0.0


# A dict, or a function of the candidate briefs returning one.
TriageAnswer = dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]]


class ScriptedProvider(Provider):
    name = "scripted"

    def __init__(
        self,
        turns: list[Turn] | None = None,
        *,
        default: Turn | None = None,
        judge_word: str | None = None,
        triage_answer: TriageAnswer | None = None,
    ) -> None:
        self.turns: list[Turn] = list(turns or [])
        self.default = default
        self.calls: list[dict[str, Any]] = []
        self.judge_word = judge_word
        self.judges = judge_word is not None
        # A dict, or a function of the candidate briefs returning one; None: no triage.
        self.triage_answer = triage_answer
        self.triages = triage_answer is not None
        self.triage_calls: list[list[dict[str, Any]]] = []
        self._lock = threading.Lock()

    def add(self, *turns: Turn) -> None:
        with self._lock:
            self.turns.extend(turns)

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        with self._lock:
            turn = self.turns.pop(0) if self.turns else self.default
            self.calls.append(
                {
                    "system": system,
                    "messages": copy.deepcopy(messages),
                    "scenario": context.scenario,
                    "item": context.item,
                }
            )
            n = len(self.calls)
        if turn is None:
            raise RuntimeError("scripted provider has no turn left")
        turn.started.set()
        deadline = time.monotonic() + turn.delay
        while time.monotonic() < deadline:
            if context.cancelled():
                raise LLMCancelled("cancelled mid-call")
            time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        if turn.error is not None:
            raise turn.error
        if context.on_delta is not None:
            for i, chunk in enumerate(word_chunks(turn.text)):
                if i and turn.chunk_delay:
                    time.sleep(turn.chunk_delay)
                    if context.cancelled():
                        raise LLMCancelled("cancelled mid-stream")
                context.emit(chunk)
        calls = [
            ToolCall(id=f"call_{n}_{i}", name=name, arguments=args) for i, (name, args) in enumerate(turn.tool_calls)
        ]
        return LLMResponse(text=turn.text, tool_calls=calls, usage=Usage(prompt_tokens=10, completion_tokens=5))

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        return self.judge_word or "continue"

    def triage(self, *, candidates: list[dict[str, Any]], context: CallContext) -> dict[str, Any]:
        self.triage_calls.append(candidates)
        answer = self.triage_answer
        return answer(candidates) if callable(answer) else dict(answer or {})
