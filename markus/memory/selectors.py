"""Reads of an agent's long-term memory: the document, observations, what is new since
the last dream, and the block the system prompt carries."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from . import search
from .document import Section, render
from .models import MemorySection, MemoryState, Observation

# One observation in the prompt or a listing is cut to this many characters.
PROMPT_OBSERVATION_CHARS = 300
# The words of an item's text the prompt's observation search uses.
PROMPT_QUERY_TERMS = 24


def sections(agent_id: str) -> QuerySet[MemorySection]:
    return MemorySection.objects.filter(agent_id=agent_id).order_by("position", "id")


def document(agent_id: str) -> list[Section]:
    return [Section(title, content) for title, content in sections(agent_id).values_list("title", "content")]


def markdown(agent_id: str) -> str:
    return render(document(agent_id))


def consolidated_through(agent_id: str) -> int:
    state = MemoryState.objects.filter(agent_id=agent_id).values_list("consolidated_through", flat=True).first()
    return int(state or 0)


def new_observations(agent_id: str) -> QuerySet[Observation]:
    """The observations no dream has been through yet, oldest first."""
    return Observation.objects.filter(agent_id=agent_id, id__gt=consolidated_through(agent_id)).order_by("id")


def observations_by_ids(agent_id: str, ids: list[int]) -> list[Observation]:
    """The agent's observations in the order of ``ids`` (a foreign id is skipped)."""
    found = Observation.objects.in_bulk([i for i in ids], field_name="id")
    return [found[i] for i in ids if i in found and found[i].agent_id == agent_id]


def one_line(text: str, limit: int = PROMPT_OBSERVATION_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prompt_state(agent_id: str) -> tuple[list[Section], bool]:
    """What the prompt block needs that does not depend on the item: MEMORY.md's
    sections and whether the agent has any observation to search (two queries; the
    loop keeps it for a run until a tool runs)."""
    return document(agent_id), Observation.objects.filter(agent_id=agent_id).exists()


def prompt_block(agent_id: str, text: str, *, state: tuple[list[Section], bool] | None = None) -> list[str]:
    """``## Long-term Memory``: MEMORY.md cut to ``LONGTERM_PROMPT_CHARS`` (whole lines,
    then a note that memory_search_longterm finds the rest), and the observations that
    best match ``text`` (at most ``LONGTERM_PROMPT_OBSERVATIONS``, each one line of at
    most PROMPT_OBSERVATION_CHARS). Empty when there is nothing to show. ``state``:
    ``prompt_state`` read before; then only the search runs (none without observations)."""
    budget = int(settings.MARKUS.get("LONGTERM_PROMPT_CHARS", 3000))
    top = int(settings.MARKUS.get("LONGTERM_PROMPT_OBSERVATIONS", 5))
    doc, searchable = state if state is not None else (document(agent_id), True)
    body = render([Section(s.title, s.content) for s in doc]).replace("\n## ", "\n### ").rstrip()
    if body.startswith("## "):
        body = "#" + body
    lines: list[str] = []
    if body:
        lines.append("From your MEMORY.md:")
        lines += _cut(body, budget)
    words = " ".join(search.terms(text, limit=PROMPT_QUERY_TERMS))
    hits = search.search_observations(agent_id, words, limit=top) if searchable and words and top > 0 else []
    if hits:
        found = Observation.objects.in_bulk([h.id for h in hits])
        lines.append("Observations that may matter here (memory_search finds more):")
        lines += [f"- [obs {h.id}] {one_line(found[h.id].content)}" for h in hits if h.id in found]
    return ["## Long-term Memory", *lines] if lines else []


def _cut(body: str, budget: int) -> list[str]:
    if len(body) <= budget:
        return body.split("\n")
    kept: list[str] = []
    used = 0
    for line in body.split("\n"):
        if used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    kept.append("… (cut here: memory_search_longterm finds the rest)")
    return kept


def observation_data(o: Observation, rank: float | None = None) -> dict[str, Any]:
    """An observation as the API and the tools show it."""
    return {"id": o.id, "content": o.content, "kind": o.kind, "count": o.count, "createdAt": o.created_at, "rank": rank}


def found_observations(agent_id: str, hits: list[search.Hit]) -> list[tuple[Observation, float]]:
    """The agent's observations a search found, best first, with their rank (one query)."""
    rows = {o.id: o for o in observations_by_ids(agent_id, [h.id for h in hits])}
    return [(rows[h.id], h.rank) for h in hits if h.id in rows]
