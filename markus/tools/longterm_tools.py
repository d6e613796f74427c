"""Long-term memory tools: save and search observations, read and write MEMORY.md,
and (in the dream cycle) consolidate."""

from __future__ import annotations

from typing import Any

from attention import scenarios as sc
from attention.toolbox import ToolContext, ToolError, tool
from mailbox.models import MailboxItem
from markus.memory import search, selectors, services
from markus.memory.document import DOCUMENT_LIMIT, SECTION_LIMIT
from markus.memory.services import Consolidation, Merge, Promote

# Saving an observation: wherever a fact, a preference or a lesson may come up (a
# person's word, feedback on one's work, a colleague's answer) and the deliberation.
# Not a system notice or a check-in (nothing new is told there), nor the report or the
# dream (they look back at what is saved).
SAVING = frozenset(
    {
        sc.CHAT,
        sc.TASK_EXECUTION,
        sc.REVIEW,
        sc.COMMENT_RESPONSE,
        sc.REQUIREMENT_ACTION,
        sc.A2A,
        sc.SESSION_RESPONSE,
        sc.MENTION_RESPONSE,
        sc.REMINDER_DUE,
        sc.DELIBERATION,
    }
)
# Searching memory: everywhere (every prompt's long-term memory block names both searches).
SEARCHING = frozenset(sc.SCENARIOS)
# Editing MEMORY.md by hand: the dream curates it; the deliberation may note a lesson.
CURATING = frozenset({sc.DREAM_CYCLE, sc.DELIBERATION})
# Consolidating: the dream's own.
DREAMING = frozenset({sc.DREAM_CYCLE})
# An observation id is a 64-bit integer: a number outside cannot be looked up.
ID_RANGE = 2**63


def _limit(args: dict[str, Any], default: int, hi: int) -> int:
    return max(1, min(int(args.get("limit") or default), hi))


def _string(tool_name: str, args: dict[str, Any], name: str, default: str | None = None) -> str:
    """A string argument; a null one (an LLM's slip) is the default or a tool error."""
    value = args.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise ToolError(f"{tool_name}: {name} must be a string")
    return value


@tool(
    "memory_save",
    "Save an observation (a fact, a preference, a lesson, a commitment) to your long-term memory; "
    "memory_search finds it later.",
    {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": f"at most {services.OBSERVATION_LIMIT} characters"},
            "kind": {"type": "string", "description": "fact, preference, lesson, commitment or note (default)"},
        },
        "required": ["content"],
    },
    scenarios=SAVING,
)
def memory_save(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    obs = services.memory_save(
        agent_id=ctx.agent_id,
        content=_string("memory_save", args, "content"),
        kind=_string("memory_save", args, "kind", "note") or "note",
        mailbox_item_id=ctx.mailbox_item_id or "",
        activity_id=ctx.activity_id or "",
    )
    return {"id": obs.id, "saved": True}


@tool(
    "memory_search",
    "Search your saved observations by words (full-text, best match first).",
    {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
    scenarios=SEARCHING,
)
def memory_search(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = _string("memory_search", args, "query")
    hits = search.search_observations(ctx.agent_id, query, limit=_limit(args, 10, 50))
    found = selectors.found_observations(ctx.agent_id, hits)
    return {"observations": [selectors.observation_data(o, round(rank, 4)) for o, rank in found]}


@tool(
    "memory_search_longterm",
    "Search the sections of your MEMORY.md by words (full-text, best match first).",
    {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
    scenarios=SEARCHING,
)
def memory_search_longterm(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = _string("memory_search_longterm", args, "query")
    hits = search.search_sections(ctx.agent_id, query, limit=_limit(args, 5, 20))
    rows = selectors.sections(ctx.agent_id).in_bulk([h.id for h in hits])
    return {
        "sections": [
            {"section": rows[h.id].title, "content": rows[h.id].content, "rank": round(h.rank, 4)}
            for h in hits
            if h.id in rows
        ]
    }


@tool(
    "memory_update_longterm",
    f"Write a section of your MEMORY.md (your curated long-term memory, shown in every prompt): "
    f"replace its text, append to it, or delete it. A section holds at most {SECTION_LIMIT} characters, "
    f"the whole document at most {DOCUMENT_LIMIT}.",
    {
        "type": "object",
        "properties": {
            "section": {"type": "string", "description": "the section's title"},
            "content": {"type": "string"},
            "mode": {"type": "string", "enum": list(services.MODES), "description": "default replace"},
        },
        "required": ["section"],
    },
    scenarios=CURATING,
)
def memory_update_longterm(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    mode = _string("memory_update_longterm", args, "mode", "replace") or "replace"
    title = _string("memory_update_longterm", args, "section")
    content = _string("memory_update_longterm", args, "content", "")
    if mode != "delete" and not content.strip():
        raise ToolError("memory_update_longterm: content must not be empty (use mode delete to remove a section)")
    return services.section_write(agent_id=ctx.agent_id, title=title, content=content, mode=mode)


@tool(
    "memory_consolidate",
    "Apply your dream: remove observations that no longer matter, merge observations that say the same "
    "thing (ids and the merged text), promote lasting lessons into MEMORY.md sections. Call it once; "
    "MEMORY.md is trimmed to its limits (a section keeps its newest lines).",
    {
        "type": "object",
        "properties": {
            "remove": {"type": "array", "items": {"type": "integer"}},
            "merge": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"ids": {"type": "array", "items": {"type": "integer"}}, "text": {"type": "string"}},
                    "required": ["ids", "text"],
                },
            },
            "promote": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"section": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["section", "text"],
                },
            },
        },
    },
    scenarios=DREAMING,
)
def memory_consolidate(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    plan = Consolidation(
        remove=_ids(args.get("remove"), "remove"),
        merge=[
            Merge(_ids(m.get("ids"), "merge.ids"), _text(m.get("text"), "merge.text")) for m in _objects(args, "merge")
        ],
        promote=[
            Promote(_text(p.get("section"), "promote.section"), _text(p.get("text"), "promote.text"))
            for p in _objects(args, "promote")
        ],
    )
    return services.consolidate(agent_id=ctx.agent_id, plan=plan, through=_through(ctx))


def _through(ctx: ToolContext) -> int | None:
    """The last observation the dream item listed (newer ones wait for the next dream)."""
    if not ctx.mailbox_item_id:
        return None
    payload = MailboxItem.objects.filter(id=ctx.mailbox_item_id).values_list("payload", flat=True).first() or {}
    through = (payload.get("extra") or {}).get("throughObservation")
    return through if isinstance(through, int) and not isinstance(through, bool) else None


def _ids(value: Any, name: str) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and -ID_RANGE <= i < ID_RANGE for i in value
    ):
        raise ToolError(f"memory_consolidate: {name} must be a list of observation ids (integers)")
    return value


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"memory_consolidate: {name} must be a non-empty string")
    return value


def _objects(args: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = args.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ToolError(f"memory_consolidate: {name} must be a list of objects")
    return value
