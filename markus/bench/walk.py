"""The walk of one item through the loop (issue 38's figure): how often following a person's
chat from the run's start to its end comes back to a module it had left.

Not a speed figure: a figure of the code's shape, measured on the running code so it stays
true as the code moves. One throwaway agent, the offline brain, the deliberation off; a
warm-up run first (imports and per-connection statements are not part of the walk), then
one person's chat enqueued and one ``attention.loop.run_attention`` in this thread under
``sys.setprofile``. Every call into the project's own code (not tests, not the virtualenv)
is one step, named by its module.

Figures:

- **stops / back**: a stop is a step into another module than the previous step's; it is
  *back* when that module was left before. This is the issue's count: every call, the
  streamed reply's per-piece path included (one round per piece the brain streams).
- **first reach**: the same over each function's first call only, the path as a reader
  follows it once.
- **jumps**: only calls made from another module (a module's calls to its own functions
  after a callee returned are not moves); back when the module was entered before.
- **app crossings**: stops whose app (``attention``, ``mailbox``, ``markus.<app>``, …)
  differs from the previous stop's.

The goal is the issue's: back in at most a third of the stops.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

from django.conf import settings

from attention import loop
from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.core.ids import new_id
from markus.llm.base import set_provider_override

from .report import Figure

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "walk"
GOAL = 1 / 3
ROOT = str(settings.BASE_DIR) + os.sep
OUTSIDE = (os.sep + ".venv" + os.sep, os.sep + "tests" + os.sep, os.sep + "bench" + os.sep)  # the measuring itself


def _module(filename: str) -> str | None:
    if not filename.startswith(ROOT) or any(part in filename for part in OUTSIDE):
        return None
    return filename[len(ROOT) :].removesuffix(".py").replace(os.sep, ".")


def _caller_module(frame: FrameType) -> str | None:
    back = frame.f_back
    while back is not None:
        module = _module(back.f_code.co_filename)
        if module is not None:
            return module
        back = back.f_back
    return None


Step = tuple[str, str, str | None]  # module, function, the calling project module


def walk_of_one_chat() -> list[Step]:
    """The steps of one person's chat through one run of the loop (see the module)."""
    agent, _ = agent_create(name="bench-walk", agent_id=new_id("bench"))
    old = dict(settings.MARKUS)
    set_provider_override(None)
    settings.MARKUS.update(LLM_PROVIDER="offline", DELIBERATION=False, WAKE_ON_ENQUEUE=False)
    steps: list[Step] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = _module(frame.f_code.co_filename)
        if module is not None:
            steps.append((module, frame.f_code.co_name, _caller_module(frame)))

    try:
        for warm_up in (True, False):
            mailbox_enqueue(
                agent_id=agent.id,
                source_type=MailboxType.HUMAN_CHAT,
                payload={"summary": "hi", "content": "hello there"},
                metadata={"senderId": "bench-walk", "senderRole": "user"},
            )
            if warm_up:
                loop.run_attention(agent.id)
                continue
            sys.setprofile(profile)
            try:
                loop.run_attention(agent.id)
            finally:
                sys.setprofile(None)
    finally:
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        agent.delete()
    return steps


def stops_and_back(modules: Iterable[str]) -> tuple[int, int]:
    """Stops (a step into another module than the previous step's) and how many of them
    come back to a module left before."""
    stops = back = 0
    previous: str | None = None
    left: set[str] = set()
    for module in modules:
        if module == previous:
            continue
        stops += 1
        back += module in left
        if previous is not None:
            left.add(previous)
        previous = module
    return stops, back


def jumps_and_back(steps: Iterable[Step]) -> tuple[int, int]:
    """Calls from another module, and how many enter a module entered before."""
    jumps = back = 0
    entered: set[str] = set()
    for module, _, caller in steps:
        if caller == module:
            continue
        jumps += 1
        back += module in entered
        entered.add(module)
    return jumps, back


def first_reach(steps: list[Step]) -> list[Step]:
    seen: set[tuple[str, str]] = set()
    first = []
    for step in steps:
        if step[:2] not in seen:
            seen.add(step[:2])
            first.append(step)
    return first


def _app(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "markus" else parts[0]


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    steps = walk_of_one_chat()
    first = first_reach(steps)
    stops, back = stops_and_back(module for module, _, _ in steps)
    first_stops, first_back = stops_and_back(module for module, _, _ in first)
    jumps, jumps_back = jumps_and_back(first)
    app_stops, _ = stops_and_back(_app(module) for module, _, _ in steps)
    modules = {module for module, _, _ in steps}
    stdout.write(
        f"walk of one chat: {len(steps)} calls in {len(modules)} modules "
        f"({sum(m.startswith('attention.') for m in modules)} of attention); "
        f"{stops} stops, {back} back; first reach {first_stops} stops, {first_back} back; "
        f"jumps {jumps}, {jumps_back} back; {app_stops - 1} app crossings\n"
    )

    def share(part: int, whole: int) -> float:
        return round(part / whole, 3) if whole else 0.0

    return [
        Figure(SUITE, "stops back to a module left", share(back, stops), "", f"{back} of {stops} stops", GOAL, "lower"),
        Figure(
            SUITE,
            "first reach: stops back",
            share(first_back, first_stops),
            "",
            f"{first_back} of {first_stops} stops",
            GOAL,
            "lower",
        ),
        Figure(
            SUITE, "jumps into a module entered before", share(jumps_back, jumps), "", f"{jumps_back} of {jumps} jumps"
        ),
        Figure(SUITE, "app crossings", app_stops - 1, "", f"of {stops} stops", better="lower"),
    ]
