"""An agent's tool-server tools found on demand. When its servers offer more than
``MARKUS["TOOLSERVER_INLINE_TOOLS"]`` tools, an item is not offered them (their schemas
would fill every request); it is offered ``tool_search`` (words in, the matching tools
out: name, server, one line of what each does) and ``tool_load`` (names in: from the
next turn on those tools are offered with their schemas, for the rest of the item's
session). The loaded tools go into ``ToolContext.offered``, the dict the item's tools
are offered from; a session resumed later loads them again from its messages
(``Tool.restore``, called by ``attention.toolbox.restore_loaded``).

Only the tools the agent may call are in the catalog these search and load (``offered.
provide`` builds it): a denied tool is neither found nor loaded, and an ``ask`` tool
loads as it is offered, asking a person before each call."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from attention.toolbox import Tool, ToolContext, ToolError

from .models import SEPARATOR

SEARCH = "tool_search"
LOAD = "tool_load"
# Hits of a search; tools an empty query lists; names one tool_load call takes.
SEARCH_HITS = 8
LIST_MAX = 40
LOAD_MAX = 8
# Tools a name the model made up loads, those its words match best.
NEAR_LOADED = 5
# What a hit says of a tool (the first sentence of its description, cut here).
LINE_CHARS = 100
# What the search tool's description says of each server, and of how many servers.
SERVER_CHARS = 80
SERVERS_NAMED = 8
# Words a search ignores.
STOPWORDS = frozenset(
    "a an and are as at be by do does for from how i in is it me my of on or that the this to what which with".split()
)


def inline_limit() -> int:
    """How many tool-server tools an agent is offered directly (more: on demand)."""
    return int(settings.MARKUS.get("TOOLSERVER_INLINE_TOOLS", 4))


def finders(catalog: dict[str, Tool], servers: list[tuple[str, str]]) -> list[Tool]:
    """``tool_search`` and ``tool_load`` over ``catalog`` (name → the tool as it would be
    offered); ``servers``: (name, description) of the servers the tools come from."""
    return [
        Tool(
            SEARCH,
            _search_description(catalog, servers),
            {"type": "object", "properties": {"query": {"type": "string"}}},
            lambda ctx, args: search(catalog, args.get("query")),
        ),
        Tool(
            LOAD,
            "Load tools tool_search found, by name: from your next turn on you can call them (for the rest of "
            "this work).",
            {
                "type": "object",
                "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                "required": ["names"],
            },
            lambda ctx, args: load(catalog, ctx, args),
            restore=lambda offered, messages: restore(catalog, offered, messages),
            finds=lambda name, exact: finds(catalog, name, exact=exact),
        ),
    ]


def _search_description(catalog: dict[str, Tool], servers: list[tuple[str, str]]) -> str:
    counts: dict[str, int] = {}
    for t in catalog.values():
        counts[t.source] = counts.get(t.source, 0) + 1
    named: list[str] = []
    for name, description in servers:
        if name not in counts or len(named) == SERVERS_NAMED:
            continue
        about = f"{_cut(description, SERVER_CHARS)}; " if description.strip() else ""
        named.append(f"{name} ({about}{counts[name]} tools)")
    rest = len([n for n, _ in servers if n in counts]) - len(named)
    listed = ", ".join(named) + (f" and {rest} more" if rest > 0 else "")
    return (
        f"Find the tools of your tool servers: {listed}. query: words for what you want to do; each hit is a "
        "tool's name, server and what it does (an empty query lists them all). Then tool_load the ones you need."
    )


# ---------------------------------------------------------------------------- search


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _words(text: str) -> list[str]:
    return [_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS]


def _weight(word: str, tokens: set[str], whole: float, part: float) -> float:
    if word in tokens:
        return whole
    if len(word) >= 4 and any(len(t) >= 4 and (t.startswith(word) or word.startswith(t)) for t in tokens):
        return part
    return 0.0


def _score(t: Tool, words: list[str]) -> float:
    name = set(_words(t.name.split(SEPARATOR, 1)[-1]))
    server = set(_words(t.source))
    text = set(_words(t.description))
    return sum(
        max(_weight(w, name, 3.0, 2.0), _weight(w, server, 1.0, 0.5), _weight(w, text, 1.0, 0.5))
        for w in dict.fromkeys(words)
    )


def ranked(catalog: dict[str, Tool], query: str) -> list[Tool]:
    """The catalog's tools that match ``query``'s words, the best first; among those that
    match alike, the tools no person must approve first (a model looks before it changes
    anything: the real small model searched its server's name and loaded the first hits)."""
    words = _words(query)
    scored = [(-s, t.approval is not None, name) for name, t in catalog.items() if (s := _score(t, words)) > 0]
    return [catalog[name] for *_, name in sorted(scored)]


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def one_line(t: Tool) -> str:
    """What a tool does, in a line: the first sentence of its description."""
    first = (t.description.strip().splitlines() or [""])[0]
    sentence = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    return _cut(sentence, LINE_CHARS)


def _hit(t: Tool) -> dict[str, Any]:
    hit = {"name": t.name, "server": t.source, "description": one_line(t)}
    if t.approval is not None:
        hit["asks"] = "a person approves each call"
    return hit


def search(catalog: dict[str, Tool], query: Any) -> dict[str, Any]:
    """Up to ``SEARCH_HITS`` tools matching the query's words; an empty query lists the
    catalog (at most ``LIST_MAX``)."""
    if query is not None and not isinstance(query, str):
        raise ToolError(f"{SEARCH}: query must be a string of words")
    query = (query or "").strip()
    if not query:
        tools = list(catalog.values())
        shown = [_hit(t) for t in tools[:LIST_MAX]]
        return {"tools": shown, "more": len(tools) - len(shown), "note": f"{LOAD} the names you need."}
    hits = ranked(catalog, query)
    if not hits:
        return {
            "tools": [],
            "note": f"No tool matches {query!r}. The tools there are: {', '.join(list(catalog)[:LIST_MAX])}.",
        }
    shown = [_hit(t) for t in hits[:SEARCH_HITS]]
    return {"tools": shown, "more": len(hits) - len(shown), "note": f"{LOAD} the names you need."}


# ---------------------------------------------------------------------------- load


def resolve(catalog: dict[str, Tool], name: str) -> str | None:
    """The catalog's name for ``name``: itself, its spelling in another case, the one
    tool of that name without its server's prefix, or with that prefix written twice
    (``git__git__git_log``); None if there is none."""
    head, separator, rest = name.partition(SEPARATOR)
    if separator and rest.casefold().startswith(head.casefold() + SEPARATOR):
        name = rest
    if name in catalog:
        return name
    folded = name.casefold()
    same = [n for n in catalog if n.casefold() == folded]
    if len(same) == 1:
        return same[0]
    if SEPARATOR not in name:
        bare = [n for n in catalog if n.split(SEPARATOR, 1)[-1].casefold() == folded]
        if len(bare) == 1:
            return bare[0]
    return None


def closest(catalog: dict[str, Tool], name: str) -> list[str]:
    """Up to three valid names nearest to ``name``: by spelling, else by its words."""
    names = list(catalog)
    near = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if not near:
        bare = {n.split(SEPARATOR, 1)[-1]: n for n in names}
        near = [bare[b] for b in difflib.get_close_matches(name.split(SEPARATOR, 1)[-1], list(bare), n=3, cutoff=0.5)]
    return near or [t.name for t in ranked(catalog, name.replace("_", " "))[:3]]


def finds(catalog: dict[str, Tool], name: str, *, exact: bool) -> list[Tool]:
    """For a name the model called that it was not offered: the catalog's tool of that
    name (``exact``; as ``tool_load`` resolves it), or up to ``NEAR_LOADED`` tools whose
    words match the name's, the best first (a name made up of what it wants done)."""
    if exact:
        found = resolve(catalog, name)
        return [] if found is None else [catalog[found]]
    return ranked(catalog, name)[:NEAR_LOADED]


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(n, str) and n.strip() for n in value):
        raise ToolError(f"{LOAD}: names must be a list of tool names ({SEARCH} finds them)")
    if len(value) > LOAD_MAX:
        raise ToolError(f"{LOAD}: load at most {LOAD_MAX} tools at once")
    return [n.strip() for n in value]


def load(catalog: dict[str, Tool], ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Add the named tools to what the item is offered (``ctx.offered``); say which were
    loaded, which were offered already and which names are unknown (with the closest)."""
    names = _names(args.get("names"))
    if ctx.offered is None:
        raise ToolError(f"{LOAD}: tools cannot be loaded here")
    loaded: list[str] = []
    already: list[str] = []
    unknown: list[dict[str, Any]] = []
    for name in names:
        found = resolve(catalog, name)
        if found is None:
            unknown.append({"name": name, "closest": closest(catalog, name)})
        elif found in ctx.offered:
            already.append(found)
        else:
            ctx.offered[found] = catalog[found]
            loaded.append(found)
    result: dict[str, Any] = {"loaded": loaded}
    if already:
        result["alreadyOffered"] = already
    if unknown:
        result["unknown"] = unknown
    if loaded or already:
        result["note"] = "Call them from your next turn on, by these names."
    return result


def _calls(messages: list[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
    """The session's tool calls, in order: (name, arguments as an object where they are one)."""
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            args = function.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args or "{}")
                except json.JSONDecodeError:
                    args = None
            yield function["name"], args


def _asked(args: Any) -> list[str]:
    """The names a ``tool_load`` call's arguments ask for (none for arguments its checks
    refused: the call loaded nothing)."""
    if not isinstance(args, dict):
        return []
    try:
        return _names(args.get("names"))
    except ToolError:
        return []


def restore(catalog: dict[str, Tool], offered: dict[str, Tool], messages: list[dict[str, Any]]) -> None:
    """Load again, in order, what the session's earlier calls loaded (those still in the
    catalog: a tool denied since, or gone from its server, is not): what ``tool_load``
    calls named, a tool called by its name unloaded, and the tools a name the model made
    up loaded (``finds``, as ``attention.toolbox`` loads them: the catalog's tool of that
    name, else those whose words match it)."""
    for name, args in _calls(messages):
        if name == LOAD:
            found = [catalog[hit] for n in _asked(args) if (hit := resolve(catalog, n)) is not None]
        elif name not in offered:
            found = finds(catalog, name, exact=True) or finds(catalog, name, exact=False)
        else:
            continue
        for t in found:
            offered.setdefault(t.name, t)
