"""Whether any budget holds the agent is answered by the statement that takes its lease
(the agent's own, its team's, its owner's for an agent outside any team, the
deployment's): a run of an agent that none holds reads no budget (one round trip less
on the way from a wake-up to the claim); a run of an agent that one holds reads them
before the item begins and before each call, as before (``markus.usage.budgets.gate``)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.usage.services import budget_set

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline_brain(offline_loop):
    offline_loop(BUDGET_PERSON_DAILY_TOKENS=0, BUDGET_PERSON_MONTHLY_COST=0)


def budget_reads_of_a_run(agent_id: str) -> int:
    mailbox_enqueue(agent_id=agent_id, source_type=T.SYSTEM_EVENT, payload={"summary": "s", "content": "c"})
    with CaptureQueriesContext(connection) as ctx:
        result = loop.run_attention(agent_id)
    assert (result.status, result.processed) == ("done", 1), result
    assert not MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).exists()
    return sum(1 for q in ctx.captured_queries if q["sql"].startswith("SELECT") and "usage_budgets" in q["sql"])


def test_a_run_of_an_agent_no_budget_holds_reads_no_budget(agent):
    loop.run_attention(agent.id)  # the agent's first run makes its attention row
    assert budget_reads_of_a_run(agent.id) == 0


@pytest.mark.parametrize("scope", ["agent", "team", "person", "deployment"])
def test_a_run_of_an_agent_a_budget_holds_reads_the_budgets(scope, alice, team):
    teamless = scope == "person"
    agent, _ = agent_create(name="Bo", role="engineer", owner=alice, team=None if teamless else team, agent_id="bo")
    loop.run_attention(agent.id)
    limits = {"dailyTokens": 1_000_000}
    if scope == "agent":
        budget_set(agent=agent, limits=limits)
    elif scope == "team":
        budget_set(team=team, limits=limits)
    elif scope == "person":
        budget_set(user=alice, limits=limits)
    else:
        budget_set(deployment=True, limits=limits)
    assert budget_reads_of_a_run(agent.id) >= 1  # before the item, and before its call


def test_a_budget_of_another_team_or_person_is_not_the_agents(agent, bob):
    from markus.agents.models import Team

    other = Team.objects.create(name="Other", owner=bob)
    budget_set(team=other, limits={"dailyTokens": 10})
    budget_set(user=bob, limits={"dailyTokens": 10})
    loop.run_attention(agent.id)
    assert budget_reads_of_a_run(agent.id) == 0


def test_a_default_budget_per_person_is_read_for_a_teamless_agent(alice, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "BUDGET_PERSON_DAILY_TOKENS", 1_000_000)
    agent, _ = agent_create(name="Cy", role="engineer", owner=alice, team=None, agent_id="cy")
    loop.run_attention(agent.id)
    assert budget_reads_of_a_run(agent.id) >= 1
