"""The lease's take says in SQL whether a budget holds the agent (``budgets.held_sql``):
when it says no, the run reads no budget at all. It must say exactly what the gate's
own rule says (``budgets_of`` and the limits the gate reads): a "no" where the gate
has a limit lets an agent spend past its budget; a "yes" where it has none costs a
run its reads for nothing. Over a table of setups (the agent's own budget, its team's,
its owner's outside any team, the deployment's, a person's default from the settings;
with limits or none, used up or not; other agents', teams' and people's budgets), for
agents in a team, outside any team, and with no owner, on SQLite and PostgreSQL."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection

from markus.agents.models import Team
from markus.agents.services import agent_create
from markus.usage.budgets import gate, held_sql
from markus.usage.models import Budget, LLMCall

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

Scope = Budget.Scope
AGENTS = ("ada", "tom", "orphan", "zed")  # in alice's team; alice's, teamless; nobody's; charlie's, teamless


@pytest.fixture
def people(alice, bob, charlie, team):
    other_team = Team.objects.create(name="Other", owner=charlie)
    agent_create(name="Ada", owner=alice, team=team, agent_id="ada")
    agent_create(name="Tom", owner=alice, agent_id="tom")
    agent_create(name="Orphan", agent_id="orphan")
    agent_create(name="Zed", owner=charlie, agent_id="zed")
    agent_create(name="Other", owner=charlie, team=other_team, agent_id="oth")
    return {"alice": alice, "bob": bob, "charlie": charlie, "team": team, "other_team": other_team}


LIMITED = {"daily_tokens": 1000}
MONTHLY = {"monthly_cost": Decimal("5")}
NO_LIMIT = {"daily_tokens": None, "monthly_cost": None}
USED_UP = {"daily_tokens": 10}

# (name, budgets as (scope, whose, limits), the person default from the settings)
SETUPS = [
    ("nothing", [], None),
    ("the agent's own", [(Scope.AGENT, "ada", LIMITED), (Scope.AGENT, "tom", MONTHLY)], None),
    ("the agent's own, used up", [(Scope.AGENT, "ada", USED_UP), (Scope.AGENT, "orphan", USED_UP)], None),
    ("the agent's own without a limit", [(Scope.AGENT, "ada", NO_LIMIT), (Scope.AGENT, "tom", NO_LIMIT)], None),
    ("another agent's", [(Scope.AGENT, "oth", LIMITED)], None),
    ("its team's", [(Scope.TEAM, "team", LIMITED)], None),
    ("its team's without a limit", [(Scope.TEAM, "team", NO_LIMIT)], None),
    ("another team's", [(Scope.TEAM, "other_team", MONTHLY)], None),
    ("its owner's", [(Scope.USER, "alice", LIMITED)], None),
    ("its owner's, used up", [(Scope.USER, "alice", USED_UP)], None),
    ("its owner's without a limit", [(Scope.USER, "alice", NO_LIMIT)], None),
    ("another person's", [(Scope.USER, "bob", LIMITED)], None),
    ("the deployment's", [(Scope.DEPLOYMENT, "", MONTHLY)], None),
    ("the deployment's without a limit", [(Scope.DEPLOYMENT, "", NO_LIMIT)], None),
    ("the deployment's, used up", [(Scope.DEPLOYMENT, "", USED_UP)], None),
    ("a person default", [], 5000),
    ("a person default, its owner's row without a limit", [(Scope.USER, "alice", NO_LIMIT)], 5000),
    ("a person default, its owner's own row", [(Scope.USER, "alice", MONTHLY)], 5000),
    ("a person default, another person's row", [(Scope.USER, "charlie", NO_LIMIT)], 5000),
    ("a person default and its team's", [(Scope.TEAM, "team", LIMITED)], 5000),
    (
        "everything without a limit",
        [
            (Scope.AGENT, "ada", NO_LIMIT),
            (Scope.TEAM, "team", NO_LIMIT),
            (Scope.USER, "alice", NO_LIMIT),
            (Scope.DEPLOYMENT, "", NO_LIMIT),
        ],
        None,
    ),
]


def held_by_sql(agent_id: str) -> bool:
    sql, params = held_sql(agent_id)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql}", params)
        (held,) = cursor.fetchone()
    return bool(held)


def held_by_the_gate(agent_id: str) -> bool:
    """The gate's rule: it reads a limit of some budget that holds the agent."""
    return bool(gate(agent_id).limits)


def test_held_sql_says_what_the_gate_says_for_every_setup(people, settings, monkeypatch):
    disagreements = []
    gate_says_held = set()
    for name, budgets, default in SETUPS:
        Budget.objects.all().delete()
        LLMCall.objects.all().delete()
        monkeypatch.setitem(settings.MARKUS, "BUDGET_PERSON_DAILY_TOKENS", default)
        monkeypatch.setitem(settings.MARKUS, "BUDGET_PERSON_MONTHLY_COST", None)
        for scope, whose, limits in budgets:
            column = {Scope.AGENT: "agent_id", Scope.TEAM: "team", Scope.USER: "user"}.get(scope)
            holder = {} if column is None else {column: whose if column == "agent_id" else people[whose]}
            Budget.objects.create(scope=scope, **holder, **limits)
        for agent_id in AGENTS:  # used up where a budget's limit is small: held all the same
            LLMCall.objects.create(agent_id=agent_id, model="m", scenario="s", input_tokens=50)
        for agent_id in AGENTS:
            by_gate, by_sql = held_by_the_gate(agent_id), held_by_sql(agent_id)
            if by_gate:
                gate_says_held.add((name, agent_id))
            if by_gate != by_sql:
                disagreements.append(f"{name} / {agent_id}: gate {by_gate}, held_sql {by_sql}")
    assert not disagreements, "\n".join(disagreements)
    # The table covers both answers for each kind of agent.
    assert {agent_id for _, agent_id in gate_says_held} == set(AGENTS)
    assert len(gate_says_held) < len(SETUPS) * len(AGENTS)
