"""A scripted provider for tests: a queue of canned turns with optional per-turn delays,
so a test can place an interrupt exactly between two turns.

Every call is recorded (system prompt, messages as sent), so a test can assert what a
resumed session saw.
"""

from __future__ import annotations

import copy
import json
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
# A deliberation turn made from the candidate briefs (their ids are known only then).
DeliberationTurn = Callable[[list[dict[str, Any]]], Turn]
# Scenario names (attention.scenarios) of triage and deliberation.
TRIAGE, DELIBERATION = "triage", "deliberation"


class ScriptedProvider(Provider):
    """``turns``: the items' turns, in order. Triage and deliberation (seed section 21)
    have their own scripts, so scripting them never shifts the items' turns:

    - ``triage_answer`` (a dict, or a function of the candidate briefs): the mini
      triage's JSON answer; ``triage_turns``: its turns (tool rounds, a malformed answer)
      played first. Without either the provider does not triage.
    - ``deliberation``: the turns of deliberations (a function of the candidate briefs
      returning a Turn is played too); None: the provider does not deliberate, an
      exhausted script makes a deliberation fail (the loop falls back to the mini
      triage).

    Every call is recorded: ``calls`` (the items'), ``triage_calls`` (candidate briefs),
    ``deliberation_calls`` (system, messages, candidates, model)."""

    name = "scripted"

    def __init__(
        self,
        turns: list[Turn] | None = None,
        *,
        default: Turn | None = None,
        judge_word: str | None = None,
        triage_answer: TriageAnswer | None = None,
        triage_turns: list[Turn] | None = None,
        deliberation: list[Turn | DeliberationTurn] | None = None,
    ) -> None:
        self.turns: list[Turn] = list(turns or [])
        self.default = default
        self.calls: list[dict[str, Any]] = []
        self.judge_word = judge_word
        self.judges = judge_word is not None
        # A dict, or a function of the candidate briefs returning one; None: no triage.
        self.triage_answer = triage_answer
        self.triage_turns: list[Turn] = list(triage_turns or [])
        self.triages = triage_answer is not None or bool(triage_turns)
        self.triage_calls: list[list[dict[str, Any]]] = []
        self.deliberation: list[Turn | DeliberationTurn] = list(deliberation or [])
        self.deliberates = deliberation is not None
        self.deliberation_calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, *turns: Turn) -> None:
        with self._lock:
            self.turns.extend(turns)

    def add_deliberation(self, *turns: Turn | DeliberationTurn) -> None:
        with self._lock:
            self.deliberation.extend(turns)

    def _triage_turn(self, context: CallContext) -> Turn:
        candidates = list(context.item.get("candidates") or [])
        with self._lock:
            turn = self.triage_turns.pop(0) if self.triage_turns else None
        if turn is not None:
            self.triage_calls.append(candidates)  # one per call (a tool round is a call)
            return turn
        return Turn(text=json.dumps(self.triage(candidates=candidates, context=context)))

    def _deliberation_turn(self, system: str, messages: list[dict[str, Any]], context: CallContext) -> Turn:
        candidates = list(context.item.get("candidates") or [])
        with self._lock:
            self.deliberation_calls.append(
                {
                    "system": system,
                    "messages": copy.deepcopy(messages),
                    "candidates": candidates,
                    "model": context.model,
                }
            )
            if not self.deliberation:
                raise RuntimeError("scripted provider has no deliberation turn left")
            turn = self.deliberation.pop(0)
        return turn(candidates) if callable(turn) else turn

    def _play(self, turn: Turn, context: CallContext, n: int) -> LLMResponse:
        turn.started.set()
        deadline = time.monotonic() + turn.delay
        while time.monotonic() < deadline:
            if context.cancelled():
                raise LLMCancelled("cancelled mid-call")
            time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        if turn.error is not None:
            raise turn.error
        calls = [
            ToolCall(id=f"call_{n}_{i}", name=name, arguments=args) for i, (name, args) in enumerate(turn.tool_calls)
        ]
        return LLMResponse(text=turn.text, tool_calls=calls, usage=Usage(prompt_tokens=10, completion_tokens=5))

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        if context.scenario == TRIAGE:
            return self._play(self._triage_turn(context), context, len(self.triage_calls))
        if context.scenario == DELIBERATION:
            return self._play(self._deliberation_turn(system, messages, context), context, len(self.deliberation_calls))
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
