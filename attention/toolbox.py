"""The tool registry and dispatcher, owned by the loop that offers the tools.

Tool implementations live above the loop (``markus.tools``) and register themselves
with ``@tool`` when ``load_tools()`` imports the modules named in
``settings.MARKUS["TOOL_MODULES"]``: the loop never imports its tools. Tools that depend
on the agent (those of the MCP servers attached to it, ``markus.toolservers``) answer the
``markus.core.signals.tools_wanted`` signal: ``tools_for`` is what an item is offered, the
built-in tools of its scenario and what the receivers answer.
"""

from __future__ import annotations

import difflib
import importlib
import json
import logging
import math
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from django.conf import settings

from markus import telemetry
from markus.core.errors import MarkusError
from markus.core.input import check_data
from markus.core.signals import tools_wanted

from .no_progress import UNKNOWN_TOOL

log = logging.getLogger(__name__)


class ToolError(MarkusError):
    """A tool refused; the message goes back to the LLM as the tool result."""


@dataclass
class ToolContext:
    agent_id: str
    agent_name: str
    mailbox_item_id: str | None = None
    activity_id: str | None = None
    scenario: str = ""
    task_id: str | None = None
    # Set by tools that park the item (request_user_approval).
    effects: dict[str, Any] = field(default_factory=dict)
    # The journal's key of the call being made (item, attempt, turn, position): a tool
    # whose effect leaves the database carries it to that effect, so that a second
    # attempt of the same call finds the first (``Tool.idempotent``).
    call_key: str = ""
    # The LLM's id of the call being made (its tool_call id), for the call's trace span.
    call_id: str = ""
    # What this item is offered (``tools_for``), read once when the item begins; None:
    # the built-in tools of ``scenario``.
    offered: dict[str, Tool] | None = None


# A tool's implementation: the context and the LLM's arguments in, the result out.
ToolHandler = Callable[[ToolContext, dict[str, Any]], Any]
_H = TypeVar("_H", bound=ToolHandler)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    # Scenarios the tool is offered in; None = all.
    scenarios: frozenset[str] | None = None
    # Everything the tool changes is in this database: the journal records the call in
    # the transaction of its effect (both or neither). False: its effect leaves the
    # database (a server, a process), so the call is recorded as started before it runs.
    transactional: bool = True
    # With ``transactional`` False: calling it again with the same ``ToolContext.call_key``
    # finds the first call's effect instead of making a second one, so a call in flight
    # when its worker died is simply made again.
    idempotent: bool = False
    # A person approves each call before it is made (the tool's policy is ``ask``): the
    # journal parks the item with the approval this makes (its id is returned; it names
    # the tool and its arguments) and makes the call once it is granted.
    approval: Callable[[ToolContext, dict[str, Any]], str] | None = None
    # Where the tool comes from, for the lists people read: "built-in", or the server's name.
    source: str = "built-in"
    # A tool that adds to what the item is offered (``ToolContext.offered``: the tool
    # servers' ``tool_load``, by its calls or by what it ``finds`` for a call) re-adds, in
    # a resumed session, what the session's calls added, read from its messages
    # (``restore_loaded``).
    restore: Callable[[dict[str, Tool], list[dict[str, Any]]], None] | None = None
    # A tool that finds tools the item is not offered yet (the tool servers' ``tool_load``):
    # ``finds(name, exact)`` is the tool called ``name`` (``exact``), or those whose words
    # match a name the model made up, the best first; the loop loads what it finds
    # (``offered``, ``unknown_tool``).
    finds: Callable[[str, bool], list[Tool]] | None = None

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


TOOLS: dict[str, Tool] = {}


def tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    *,
    scenarios: AbstractSet[str] | None = None,
    transactional: bool = True,
    idempotent: bool = False,
) -> Callable[[_H], _H]:
    def wrap(fn: _H) -> _H:
        TOOLS[name] = Tool(
            name,
            description,
            parameters,
            fn,
            frozenset(scenarios) if scenarios is not None else None,
            transactional=transactional,
            idempotent=idempotent,
        )
        return fn

    return wrap


def load_tools() -> dict[str, Tool]:
    for module in settings.MARKUS["TOOL_MODULES"]:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return TOOLS


def builtin_for(scenario: str) -> dict[str, Tool]:
    load_tools()
    return {n: t for n, t in TOOLS.items() if t.scenarios is None or scenario in t.scenarios}


def tools_for(agent_id: str, scenario: str) -> dict[str, Tool]:
    """Everything an item of ``scenario`` is offered: the built-in tools, then what each
    receiver of ``tools_wanted`` answers (a name taken already keeps its first tool)."""
    found = builtin_for(scenario)
    for _, offered in tools_wanted.send(sender=Tool, agent_id=agent_id, scenario=scenario):
        for t in cast("list[Tool]", offered):
            found.setdefault(t.name, t)
    return found


def schemas_for(scenario: str) -> list[dict[str, Any]]:
    return [t.schema() for t in builtin_for(scenario).values()]


def _whole(value: Any, schema: dict[str, Any], where: str) -> Any:
    """An integer argument as the LLM meant it: a decimal (``1.7``) rounded to the
    nearest whole number (halves up, ``2.5`` → 3), then checked against the schema's
    ``minimum`` / ``maximum``. Anything that is not a finite number is left for the type
    check to refuse."""
    if isinstance(value, float) and math.isfinite(value):
        value = math.floor(value + 0.5)
    if isinstance(value, int) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            span = f"from {low} to {high}" if low is not None and high is not None else None
            span = span or (f"at least {low}" if low is not None else f"at most {high}")
            raise ToolError(f"{where} must be an integer {span} (got {value})")
    return value


def _round_integers(value: Any, schema: dict[str, Any], where: str) -> Any:
    """``value`` with every integer of ``schema`` in it rounded (``_whole``): the
    arguments themselves, the items of an array, the properties of an object."""
    kind = schema.get("type")
    if kind == "integer":
        return _whole(value, schema, where)
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_round_integers(v, schema["items"], f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return {
            k: _round_integers(v, props[k], f"{where}.{k}" if where else k) if isinstance(props.get(k), dict) else v
            for k, v in value.items()
        }
    return value


def _check_args(t: Tool, args: dict[str, Any]) -> None:
    props = t.parameters.get("properties", {})
    for required in t.parameters.get("required", []):
        if required not in args:
            raise ToolError(f"{t.name}: missing required argument {required!r}")
        if args[required] is None:  # null: no value, which a tool that needs it cannot use
            kind = props.get(required, {}).get("type")
            raise ToolError(f"{t.name}: {required} must be a {kind}" if kind else f"{t.name}: {required} is required")
    types = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list}
    for key, value in args.items():
        if key not in props:
            raise ToolError(f"{t.name}: unknown argument {key!r}; expected {', '.join(props) or 'none'}")
        expected = types.get(props[key].get("type", ""))
        if expected is not None and value is not None and not isinstance(value, expected):
            raise ToolError(f"{t.name}: argument {key!r} must be a {props[key]['type']}")


def offered(ctx: ToolContext, name: str) -> Tool | None:
    """The tool of that name if it is offered in the context (its item's tools, else
    the built-in tools of its scenario). A tool the item could load by that name (a tool
    server's, found on demand) is loaded by the call: the model knew it, from a search or
    an earlier session, and it is offered from the next turn on."""
    if ctx.offered is not None:
        t = ctx.offered.get(name)
        if t is None and (found := _found(ctx.offered, name, exact=True)):
            t = ctx.offered.setdefault(found[0].name, found[0])
        return t
    load_tools()
    t = TOOLS.get(name)
    if t is None or (t.scenarios is not None and ctx.scenario not in t.scenarios):
        return None
    return t


def arguments_of(t: Tool, args: Any) -> dict[str, Any]:
    """The LLM's arguments for ``t`` as an object, checked against its parameters;
    ToolError says what is wrong with them."""
    if isinstance(args, str):
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError:
            raise ToolError(f"{t.name}: arguments are not valid JSON") from None
    if not isinstance(args, dict):
        raise ToolError(f"{t.name}: arguments must be an object")
    try:
        check_data(args, "arguments")  # a NUL or a lone surrogate: the LLM is told, nothing is stored
    except MarkusError as exc:
        raise ToolError(f"{t.name}: {exc}") from None
    try:
        args = _round_integers(args, t.parameters, "")
    except ToolError as exc:
        raise ToolError(f"{t.name}: {exc}") from None
    _check_args(t, args)
    return args


def execute_tool(ctx: ToolContext, name: str, args: Any) -> tuple[bool, str]:
    """Run a tool; returns (ok, result text). Errors become readable results, never raise.
    Each call is an ``execute_tool`` span when traces are on (markus.telemetry)."""
    with telemetry.tool_span(name, ctx.call_id, args) as span:
        ok, text = _execute(ctx, name, args)
        span.result(ok, text)
    return ok, text


#: At most this many names in an unknown tool's error.
UNKNOWN_TOOL_NAMES = 40


def closeness(wanted: str, name: str) -> float:
    """How close a made-up tool name is to a real one: their spelling (difflib) and the
    words they share, by their first four letters (``remind_me`` is near
    ``schedule_reminder``)."""
    stems = {w[:4] for w in name.lower().replace("-", "_").split("_") if len(w) > 2}
    asked = {w[:4] for w in wanted.lower().replace("-", "_").split("_") if len(w) > 2}
    shared = len(stems & asked) / max(1, len(asked))
    return difflib.SequenceMatcher(None, wanted.lower(), name.lower()).ratio() + shared


# A name a result goes by (``tool_response``, ``function_result``), not a tool's.
RESULT_NAME = re.compile(r"(?:^|_)(?:response|result|results|output)$", re.I)


def _found(tools: dict[str, Tool], name: str, *, exact: bool) -> list[Tool]:
    """What the offered tools that find others (``Tool.finds``) find for ``name``."""
    return [t for finder in tools.values() if finder.finds is not None for t in finder.finds(name, exact)]


def _load_near(ctx: ToolContext, name: str) -> list[Tool]:
    """The tools the item could load whose words match a name the model made up, loaded
    into what it is offered (from its next turn on)."""
    if ctx.offered is None:
        return []
    near = _found(ctx.offered, name, exact=False)
    for t in near:
        ctx.offered.setdefault(t.name, t)
    return near


def unknown_tool(ctx: ToolContext, name: str) -> str:
    """An unknown tool's error: the tools the model may call here, the closest first.
    The tools the item could load whose words match the name are loaded (a small model
    names a tool after what it wants done: "Summarise the last commit", or makes one up:
    "git_read_last_commit"), and the error names them first, to be called from the next
    turn; they come before a built-in tool whose spelling is near (``task_comment``)."""
    name = str(name)
    near = [t.name for t in _load_near(ctx, name)]
    names = list(ctx.offered) if ctx.offered is not None else list(builtin_for(ctx.scenario))
    closest = {n: closeness(name, n) for n in names}
    close = near or [n for n in sorted(names, key=lambda n: (-closest[n], n)) if closest[n] >= 0.5][:3]
    if RESULT_NAME.search(name):  # a small model "answers" a result by calling it back
        hint = " A tool's result is not a tool to call: read it, then make your next call or write your answer."
    elif near:
        hint = (
            f" The tools of your tool servers that match it are loaded now: {', '.join(near)}; call one of them "
            "from your next turn, with its arguments."
        )
    elif close:
        hint = f" Did you mean {close[0]}?"
    else:  # no tool near it: a small model named one after whom it answers, or what about
        hint = " If you meant to answer, write the answer as your reply, in plain text, with no tool call."
    ordered = [*close, *sorted(n for n in names if n not in close)][:UNKNOWN_TOOL_NAMES]
    more = f" (and {len(names) - len(ordered)} more)" if len(names) > len(ordered) else ""
    return f"{UNKNOWN_TOOL}{name!r}: it does not exist here.{hint} Tools you may call: {', '.join(ordered)}{more}."


def _execute(ctx: ToolContext, name: str, args: Any) -> tuple[bool, str]:
    t = offered(ctx, name)
    if t is None:
        return False, json.dumps({"error": unknown_tool(ctx, name)})
    try:
        args = arguments_of(t, args)
        result = t.handler(ctx, args)
    except MarkusError as exc:
        return False, json.dumps({"error": str(exc)})
    except Exception as exc:  # a tool bug must not kill the loop; the LLM sees it
        log.exception("tool %s failed", name)
        return False, json.dumps({"error": f"{name} failed: {exc.__class__.__name__}"})
    return True, json.dumps(result, default=str)


def restore_loaded(offered: dict[str, Tool], agent_id: str, scenario: str, messages: list[dict[str, Any]]) -> None:
    """What the item's earlier calls added to ``offered`` (``tools_for(agent_id,
    scenario)``, read anew for a resumed session), added again from the session's
    ``messages``: each offered tool that can (``Tool.restore``) re-applies its own calls.
    Call it after ``tools_for`` and before the first turn or journal round of a resumed
    session; a new session has nothing to restore."""
    for t in list(offered.values()):
        if t.restore is not None:
            t.restore(offered, messages)


# ---------------------------------------------------------------------------- end_turn

#: The tool that ends an item's turn (a plain final answer with no tool call ends it too).
END_TURN = "end_turn"


def _end_turn(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """The loop ends the turn after the round (``tool_loop``); the call only says so."""
    return {"ended": True}


def _item_scenarios() -> frozenset[str]:
    from .scenarios import DELIBERATION, SCENARIOS, TRIAGE

    return frozenset(SCENARIOS) - {DELIBERATION, TRIAGE}


TOOLS[END_TURN] = Tool(
    END_TURN,
    "End your turn: this item is handled. `answer`: your final answer.",
    {"type": "object", "properties": {"answer": {"type": "string"}}},
    _end_turn,
    _item_scenarios(),
)
