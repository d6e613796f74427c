"""Full-text search over observations and MEMORY.md sections, one interface on SQLite
(FTS5) and PostgreSQL (tsvector + GIN): ranked, kept in step with every write, per
agent, and safe from whatever the query string holds."""

from __future__ import annotations

import pytest
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection

from markus.memory import search, services
from markus.memory.models import MemorySection, Observation

from .conftest import save

pytestmark = [pytest.mark.pg, pytest.mark.django_db]


def found(agent_id: str, query: str) -> list[str]:
    hits = search.search_observations(agent_id, query)
    rows = Observation.objects.in_bulk([h.id for h in hits])
    return [rows[h.id].content for h in hits]


def test_the_best_match_ranks_first_and_words_are_stemmed(agent):
    save(
        agent.id,
        "The deploy pipeline needs a manual approval step",
        "Deploys fail on Friday afternoons; deploying on Friday is risky, never deploy late",
        "Alice prefers short status reports",
    )
    results = found(agent.id, "deploy friday")
    assert results[0].startswith("Deploys fail on Friday")
    assert "The deploy pipeline needs a manual approval step" in results
    assert "Alice prefers short status reports" not in results
    assert found(agent.id, "reporting")[0] == "Alice prefers short status reports"  # stemmed


def test_search_follows_updates_and_deletes_and_stays_within_the_agent(agent, grace):
    (mine,) = save(agent.id, "the staging database password rotates monthly")
    save(grace.id, "staging is grace's own business")
    assert found(agent.id, "staging") == ["the staging database password rotates monthly"]
    Observation.objects.filter(id=mine).update(content="production keys live in the vault")
    assert found(agent.id, "staging") == []
    assert found(agent.id, "vault") == ["production keys live in the vault"]
    Observation.objects.filter(id=mine).delete()
    assert found(agent.id, "vault") == []


@pytest.mark.parametrize(
    "query",
    [
        "'; DROP TABLE memory_observations; --",
        '"unbalanced quote',
        "deploy AND OR NOT",
        "NEAR(deploy friday, 2)",
        "content:deploy",
        "deploy* -friday ^x",
        "(((",
        "!@#$%^&*()",
        "a & b | !c <-> d :* ''",
        "",
    ],
)
def test_quotes_and_operators_in_a_query_are_only_words(agent, query):
    save(agent.id, "Deploy on Friday only with a rollback plan")
    hits = search.search_observations(agent.id, query)
    assert all(isinstance(h.rank, float) for h in hits)
    assert Observation.objects.filter(agent=agent).count() == 1
    if "deploy" in query.lower():
        assert len(hits) == 1
    search.search_sections(agent.id, query)


def test_sections_rank_by_title_and_text(agent):
    services.section_write(agent_id=agent.id, title="Deployment", content="Use the blue-green switch.")
    services.section_write(agent_id=agent.id, title="People", content="Bob reviews deployment scripts.")
    services.section_write(agent_id=agent.id, title="Food", content="Lunch at noon.")
    hits = search.search_sections(agent.id, "deployment")
    titles = [MemorySection.objects.get(id=h.id).title for h in hits]
    assert titles == ["Deployment", "People"]
    assert hits[0].rank > hits[1].rank


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("model", "fields", "index"),
    [(Observation, ("content",), "memory_obs_fts"), (MemorySection, ("title", "content"), "memory_sections_fts")],
)
def test_postgres_search_can_use_the_gin_indexes(agent, model, fields, index):
    # Routed by its marker (`postgres`: only the PostgreSQL pass runs it): never skipped.
    assert connection.vendor == "postgresql", "the GIN indexes are PostgreSQL's"
    qs = (
        model.objects.annotate(search=SearchVector(*fields, config=search.CONFIG))
        .filter(search=SearchQuery("gin", config=search.CONFIG))
        .values("id")
    )
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = qs.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert index in plan


def test_a_query_of_stop_words_only_finds_them_as_words_on_both_databases(agent):
    """PostgreSQL's English configuration drops "the", "or", "we" from a query; SQLite's
    FTS5 keeps them. Such a query finds the whole words on both (never a word inside
    another: "other" is not "the"), and a section's title counts too."""
    save(agent.id, "We ship on the first of the month", "Other teams deploy weekly", "or else")
    assert sorted(found(agent.id, "the")) == ["We ship on the first of the month"]
    assert sorted(found(agent.id, "we or")) == ["We ship on the first of the month", "or else"]
    services.section_write(agent_id=agent.id, title="Our habits", content="we plan together")
    sections = MemorySection.objects.in_bulk([h.id for h in search.search_sections(agent.id, "our")])
    assert [s.title for s in sections.values()] == ["Our habits"]
