"""Manager agents in two time zones, and the offline brain as the LLM."""

from __future__ import annotations

import pytest

from markus.agents.services import agent_create
from markus.llm.base import set_provider_override
from markus.llm.offline import OfflineProvider


def make_agent(owner, team, agent_id: str, *, role: str, zone: str = ""):
    agent, _ = agent_create(name=agent_id.title(), role=role, owner=owner, team=team, agent_id=agent_id)
    agent.timezone = zone
    agent.save(update_fields=["timezone"])
    return agent


@pytest.fixture
def tokyo(alice, team):
    return make_agent(alice, team, "kenji", role="Engineering Manager", zone="Asia/Tokyo")


@pytest.fixture
def new_york(alice, team):
    return make_agent(alice, team, "nora", role="manager", zone="America/New_York")


@pytest.fixture
def offline():
    set_provider_override(OfflineProvider())
    yield
    set_provider_override(None)
