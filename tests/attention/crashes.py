"""Deaths of a worker around a tool call, for the journal's tests: ``Crash`` (a
BaseException nothing in the loop catches: it leaves the item ``processing``, its
transaction rolled back, as a kill would), a brain that answers like a real model (a
side-effecting call with a fresh call id each time it is asked, until it sees a tool
result, then the final answer), and a run of the loop that is followed by another when
it dies (the next one recovers the item as after a dead worker)."""

from __future__ import annotations

import itertools
from typing import Any

from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.llm.base import LLMResponse, Provider, ToolCall, Usage

MARKER = "journal-marker-1"
_ids = itertools.count(1)


class Crash(BaseException):
    """The worker dies here: nothing in the loop catches it."""


class EffectBrain(Provider):
    """Asks for ``call`` (a tool name and its arguments; ``copies`` times in one answer)
    until a tool result is in the session, then answers. ``asked``: the calls it answered; ``crash_when(messages)``:
    raise Crash instead of answering (once)."""

    name = "effect-brain"
    local = True

    def __init__(self, tool: str, arguments: dict[str, Any], crash_when: Any = None, copies: int = 1) -> None:
        self.tool, self.arguments, self.copies = tool, arguments, copies
        self.asked = 0
        self.crash_when = crash_when
        self.seen: list[list[dict[str, Any]]] = []

    def complete(self, *, system, messages, tools, context) -> LLMResponse:
        self.seen.append([dict(m) for m in messages])
        if self.crash_when is not None and self.crash_when(messages):
            self.crash_when = None
            raise Crash
        self.asked += 1
        if not any(m.get("role") == "tool" for m in messages):
            # ``copies``: the call written that many times in the answer, as a looping model does.
            calls = [
                ToolCall(id=f"call_{next(_ids)}", name=self.tool, arguments=dict(self.arguments))
                for _ in range(self.copies)
            ]
            return LLMResponse(text="", tool_calls=calls, usage=Usage(prompt_tokens=10, completion_tokens=5))
        return LLMResponse(text="done", usage=Usage(prompt_tokens=10, completion_tokens=5))


def crash_once(monkeypatch, module, name: str, *, after: bool) -> list[int]:
    """Replace ``module.name`` so that its first call dies, before it runs or after it
    returned. Returns a list that gets an entry when the crash fired."""
    real = getattr(module, name)
    fired: list[int] = []

    def dying(*args, **kwargs):
        if fired:
            return real(*args, **kwargs)
        fired.append(1)
        if after:
            real(*args, **kwargs)
        raise Crash

    monkeypatch.setattr(module, name, dying)
    return fired


def run_until_settled(agent_id: str) -> None:
    """Run the loop like workers would: a run that dies is followed by another."""
    for _ in range(4):
        try:
            loop.run_attention(agent_id)
        except Crash:
            continue
        if not MailboxItem.objects.filter(agent_id=agent_id, status__in=[Status.QUEUED, Status.PROCESSING]).exists():
            return
    raise AssertionError("the item did not settle")
