"""No progress is a state, not a loop (ARCHITECTURE decision 18): a model that makes the
same call (its name and arguments) and is refused the same way again is told so in the
second refusal's result, and the third ends what it is doing (an item's attempt, a
deliberation). A tool that does not exist is the same call whatever its arguments (a
small model calls a task's title as a tool, with a new text each time). A call answered
exactly as it was before is no progress as well (a small model read the same list eight
times in a row): told on the second, ended on the third. One rule for the tool loop and
the deliberation."""

from __future__ import annotations

import json
from collections import Counter

from markus.llm.base import ToolCall

from .session_messages import NOTE_MARK

#: The same refused call, or the same call answered the same, this many times ends the attempt.
REPEATS = 3
NOTE = (
    f"{NOTE_MARK} You already made exactly this call and it was refused the same way. Do not repeat it: "
    "change the arguments, use another tool, or give your final answer. The next identical call ends this attempt."
)


ANSWERED_NOTE = (
    f"{NOTE_MARK} You already made exactly this call and it answered exactly the same: it has nothing new to give. "
    "Do not repeat it: use what it answered, take another step, or give your final answer. "
    "The next identical call ends this attempt."
)


#: How an unknown tool's refusal begins (``attention.toolbox.unknown_tool`` writes it).
UNKNOWN_TOOL = "unknown tool "
UNKNOWN_NOTE = (
    f"{NOTE_MARK} This tool does not exist here, and calling it again with other arguments does not help: "
    "use one of the tools listed, or give your final answer. The next call of it ends this attempt."
)


def echoed(name: str) -> str:
    """The name a call named after an unknown tool's refusal echoes: the real small model
    called ``heartbeat``, then a tool named after its refusal (``unknown tool …: it does
    not exist here. …``), then one named after that refusal, a new name each time. Such a
    call is the echoed name's call again (its refusal cut short or not)."""
    while (quoted := name.removeprefix(UNKNOWN_TOOL)) != name and quoted[:1] in ("'", '"'):
        end = quoted.find(f"{quoted[0]}:", 1)
        name = quoted[1:end] if end > 0 else quoted[1:]
    return name


def same_call(call: ToolCall, *, by_name: bool = False) -> str:
    """What makes two calls the same call: the tool's name and its arguments (its name
    alone, ``by_name``: a tool that does not exist, named as it was or after its refusal)."""
    return json.dumps([echoed(call.name)] if by_name else [call.name, call.arguments], sort_keys=True, default=str)


def distinct_calls(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls of one answer, each same call once, in their order (a small model that
    loops writes one call over and over in an answer, to its ``max_tokens``)."""
    first: dict[str, ToolCall] = {}
    for call in calls:
        first.setdefault(same_call(call), call)
    return list(first.values())


def _unknown_tool(result: str) -> bool:
    try:
        error = json.loads(result).get("error", "")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, str) and error.startswith(UNKNOWN_TOOL)


class Repeats:
    """The calls of one attempt that made no progress, counted by name and arguments:
    the refused ones, and the ones answered as before."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def made(self, call: ToolCall, ok: bool, result: str) -> tuple[str, str]:
        """A call made: its result as the model gets it (with a note from the second same
        refusal or the second same answer on), and why the attempt ends ("" while it may
        go on)."""
        return self.refused(call, result) if not ok else self.answered(call, result)

    def answered(self, call: ToolCall, result: str) -> tuple[str, str]:
        """A call that was answered: no progress when the same call was answered the
        same way before."""
        self.counts[key := f"{same_call(call)}\n{result}"] += 1
        seen = self.counts[key]
        if seen >= REPEATS:
            return result, f"no progress: the same call {call.name} answered the same {seen} times ({result[:200]})"
        return (f"{result}\n{ANSWERED_NOTE}" if seen > 1 else result), ""

    def refused(self, call: ToolCall, result: str) -> tuple[str, str]:
        """A refused call: its result as the model gets it (with the note from the second
        time on), and why the attempt ends ("" while it may go on)."""
        unknown = _unknown_tool(result)
        key = same_call(call, by_name=unknown)
        self.counts[key] += 1
        seen = self.counts[key]
        if seen >= REPEATS:
            name = echoed(call.name) if unknown else call.name
            return result, f"no progress: the same refused call {name} {seen} times ({result[:200]})"
        return (f"{result}\n{UNKNOWN_NOTE if unknown else NOTE}" if seen > 1 else result), ""
