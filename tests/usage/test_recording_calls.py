"""Recording LLM calls: a run's calls are written in one statement, each row carrying
its agent's team at that moment (an agent moved since keeps its old rows' team) and
its cost from the prices; the call of an agent deleted meanwhile is dropped."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from markus.agents.models import Agent, Team
from markus.llm.base import Usage
from markus.usage.models import LLMCall
from markus.usage.services import Call, record_calls

# Outside a test transaction, as the loop records them: a BEGIN or a COMMIT would count.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_runs_calls_are_one_statement_each_with_its_agents_team_of_the_moment(
    agent: Agent, bea: Agent, alice: User
) -> None:
    record_calls([Call(bea.id, "gpt-4o-mini", "chat", Usage(10, 5))])
    elsewhere = Team.objects.create(name="Elsewhere", owner=alice)
    Agent.objects.filter(id=bea.id).update(team=elsewhere)
    calls = [Call(a.id, "gpt-4o-mini", "chat", Usage(1_000_000, 0)) for a in (agent, bea, bea)]

    with CaptureQueriesContext(connection) as statements:
        record_calls(calls)

    assert len(statements) == 1
    rows = list(LLMCall.objects.order_by("id").values_list("agent_id", "team_id", "cost"))
    assert [(a, t) for a, t, _ in rows] == [
        (bea.id, agent.team_id),
        (agent.id, agent.team_id),
        (bea.id, elsewhere.id),
        (bea.id, elsewhere.id),
    ]
    assert rows[1][2] > Decimal(0)


def test_the_call_of_an_agent_deleted_meanwhile_is_dropped(agent: Agent, bea: Agent) -> None:
    gone = Call(bea.id, "gpt-4o-mini", "chat", Usage(10, 5))
    Agent.objects.filter(id=bea.id).delete()

    record_calls([Call(agent.id, "gpt-4o-mini", "chat", Usage(10, 5)), gone])

    assert list(LLMCall.objects.values_list("agent_id", flat=True)) == [agent.id]


def test_a_run_of_more_calls_than_one_statement_may_hold_records_every_one(agent: Agent) -> None:
    """SQLite joins at most 500 SELECTs in one compound statement: a run with more calls
    (a large ``MARKUS_RUN_BUDGET_ITEMS`` on the offline brain) lost all of its usage."""
    calls = [Call(agent.id, "gpt-4o-mini", "chat", Usage(n, 1)) for n in range(1, 1202)]

    with CaptureQueriesContext(connection) as statements:
        record_calls(calls)

    assert len(statements) == 3  # at most CALLS_PER_STATEMENT a statement
    assert LLMCall.objects.count() == 1201
    assert sorted(LLMCall.objects.values_list("input_tokens", flat=True)) == list(range(1, 1202))
