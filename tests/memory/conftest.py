"""Long-term memory fixtures: a second agent (grace) of alice's team, and helpers."""

from __future__ import annotations

import pytest

from markus.agents.services import agent_create
from markus.memory import services


@pytest.fixture
def grace(alice, team):
    a, _ = agent_create(name="Grace", role="analyst", owner=alice, team=team, agent_id="grace")
    return a


def save(agent_id: str, *texts: str) -> list[int]:
    return [services.memory_save(agent_id=agent_id, content=t).id for t in texts]
