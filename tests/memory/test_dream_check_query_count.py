"""The dream cycle's beat check reads the new observations of all running agents at once,
so it costs the same queries for 2 agents as for 8 (it counted each agent's observations
one by one)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from markus.agents.services import agent_create
from markus.memory.dream import due_agents
from markus.memory.models import MemoryState, Observation

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def crew(alice, start: int, n: int) -> None:
    for i in range(start, start + n):
        agent, _ = agent_create(name=f"A{i}", owner=alice, agent_id=f"a{i}")
        Observation.objects.bulk_create(Observation(agent=agent, content=f"note {j}") for j in range(50 + i))
        if i % 2:  # half of them dreamt before: only what came after counts
            first = Observation.objects.filter(agent=agent).order_by("id")[0].id
            MemoryState.objects.create(agent=agent, consolidated_through=first + 9)


def check(now) -> tuple[list[tuple[str, int]], int]:
    with CaptureQueriesContext(connection) as queries:
        due = due_agents(now)
    return [(d.agent_id, d.new) for d in due], len(queries)


def test_the_check_costs_the_same_queries_for_many_agents(alice):
    crew(alice, 0, 2)
    few, few_queries = check(timezone.now())
    assert few == [("a0", 50)]  # a1: 51 - 10 dreamt = 41, not enough
    crew(alice, 2, 6)
    many, many_queries = check(timezone.now())
    assert many == [("a6", 56), ("a4", 54), ("a2", 52), ("a0", 50)]  # odd ones: 40 + i new, too few
    assert many_queries == few_queries
