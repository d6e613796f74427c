"""Full-text search over observations and MEMORY.md sections, one interface on both
databases, ranked best first:

- SQLite: the FTS5 tables of migration 0002 (porter stemming), ranked by bm25 (a
  section's title weighs twice its text);
- PostgreSQL: ``to_tsvector('english', …)`` over the GIN expression indexes of
  migration 0002, ranked by ``ts_rank``. That configuration drops stop words ("the",
  "or", "we") which FTS5 keeps: when nothing matches and the query had some, they are
  looked for as whole words (a regular expression, newest first), as SQLite would find them.

A query is reduced to its words (letters and digits) before it reaches either engine,
any of them matching: quotes, operators and FTS syntax in what a person or an LLM typed
are only separators, never syntax, and every value is a bound parameter.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import reduce

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
from django.db import connection
from django.db.models import Q

from .models import MemorySection, Observation

CONFIG = "english"
MAX_TERMS = 32
_WORD = re.compile(r"[^\W_]+")


def terms(query: str, *, limit: int = MAX_TERMS) -> list[str]:
    """The distinct words of ``query`` (lower case, in order, at most ``limit``). Not
    case-folded: the engines normalise the stored text their own way (FTS5's unicode61,
    PostgreSQL's lower()), and a fold they do not make ("ß" to "ss") finds nothing."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


@dataclass
class Hit:
    id: int
    rank: float


def _sqlite(table: str, fts: str, weights: str, agent_id: str, words: list[str], limit: int) -> list[Hit]:
    match = " OR ".join(f'"{w}"' for w in words)  # words are [^\W_]+: no quote inside
    sql = (
        f"SELECT t.id, bm25({fts}{weights}) AS score FROM {fts} JOIN {table} t ON t.id = {fts}.rowid "
        f"WHERE {fts} MATCH %s AND t.agent_id = %s ORDER BY score, t.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, agent_id, limit])
        # bm25 is lower for a better match; the rank given out is higher for better.
        return [Hit(int(row[0]), -float(row[1])) for row in cursor.fetchall()]


def _postgres(
    model: type[Observation] | type[MemorySection], fields: tuple[str, ...], agent_id: str, words: list[str], limit: int
) -> list[Hit]:
    """Matched through the indexed expression; ranked with the first field (a
    section's title) weighing more than the rest."""
    indexed = SearchVector(*fields, config=CONFIG)
    weighted = reduce(
        operator.add, (SearchVector(f, config=CONFIG, weight="A" if i == 0 else "B") for i, f in enumerate(fields))
    )
    query = reduce(operator.or_, (SearchQuery(w, config=CONFIG) for w in words))
    rows = (
        model.objects.filter(agent_id=agent_id)
        .annotate(search=indexed)
        .filter(search=query)
        .annotate(rank=SearchRank(weighted if len(fields) > 1 else indexed, query))
        .order_by("-rank", "-id")
        .values_list("id", "rank")[:limit]
    )
    hits = [Hit(int(i), float(r)) for i, r in rows]
    if hits:
        return hits
    stop = _stop_words(words)  # one more statement, only when nothing matched
    return _plain(model, fields, agent_id, stop, limit, whole_words=True) if stop else []


def _stop_words(words: list[str]) -> list[str]:
    """The words PostgreSQL's configuration leaves out of a query."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w FROM unnest(%s::text[]) AS w WHERE numnode(plainto_tsquery(%s::regconfig, w)) = 0",
            [words, CONFIG],
        )
        return [row[0] for row in cursor.fetchall()]


def _plain(
    model: type[Observation] | type[MemorySection],
    fields: tuple[str, ...],
    agent_id: str,
    words: list[str],
    limit: int,
    *,
    whole_words: bool = False,
) -> list[Hit]:
    """Another database: any word contained, newest first (rank: words found). With
    ``whole_words`` (PostgreSQL's stop words) a word inside another does not count."""
    if whole_words:  # PostgreSQL's \m and \M: the start and the end of a word
        match = reduce(operator.or_, (Q(**{f"{f}__iregex": rf"\m{w}\M"}) for w in words for f in fields))
        patterns = [re.compile(rf"\b{w}\b") for w in words]
    else:
        match = reduce(operator.or_, (Q(**{f"{f}__icontains": w}) for w in words for f in fields))
        patterns = [re.compile(re.escape(w)) for w in words]
    found = []
    for row in model.objects.filter(agent_id=agent_id).filter(match).order_by("-id").values("id", *fields)[:500]:
        text = " ".join(str(row[f]) for f in fields).lower()
        found.append(Hit(row["id"], float(sum(bool(p.search(text)) for p in patterns))))
    return sorted(found, key=lambda h: -h.rank)[:limit]


def search_observations(agent_id: str, query: str, *, limit: int = 10) -> list[Hit]:
    words = terms(query)
    if not words:
        return []
    if connection.vendor == "sqlite":
        return _sqlite("memory_observations", "memory_observations_fts", "", agent_id, words, limit)
    if connection.vendor == "postgresql":
        return _postgres(Observation, ("content",), agent_id, words, limit)
    return _plain(Observation, ("content",), agent_id, words, limit)


def search_sections(agent_id: str, query: str, *, limit: int = 5) -> list[Hit]:
    words = terms(query)
    if not words:
        return []
    if connection.vendor == "sqlite":
        return _sqlite("memory_sections", "memory_sections_fts", ", 2.0, 1.0", agent_id, words, limit)
    if connection.vendor == "postgresql":
        return _postgres(MemorySection, ("title", "content"), agent_id, words, limit)
    return _plain(MemorySection, ("title", "content"), agent_id, words, limit)
