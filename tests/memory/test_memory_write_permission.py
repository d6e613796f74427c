"""Who may write an agent's memory through the API: a teammate may read an agent's
long-term memory, as they may watch it, but only those who may change the agent (its owner,
its team's owner, staff) or the agent itself with its own token write MEMORY.md or add
observations; a teammate gets 403 and nothing changes."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.memory import selectors, services
from markus.memory.models import Observation
from tests.api.test_typed_responses import assert_matches_schema
from tests.conftest import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.pg]
MEMORY = "/api/agents/{agent_id}/memory"
OBSERVATIONS = "/api/agents/{agent_id}/memory/observations"


def test_a_teammate_reads_the_memory_but_may_not_write_it(agent, bob):
    services.section_write(agent_id=agent.id, title="People", content="- Bob approves deploys")
    teammate = client_for(bob)
    assert teammate.get(f"/api/agents/{agent.id}/memory").status_code == 200
    assert teammate.get(f"/api/agents/{agent.id}/memory/search", {"q": "deploys"}).status_code == 200

    put = teammate.put(f"/api/agents/{agent.id}/memory", {"markdown": "## People\n\n- Bob owns it all"}, format="json")
    assert put.status_code == 403, put.content
    assert_matches_schema("PUT", MEMORY, 403, put.json())
    post = teammate.post(f"/api/agents/{agent.id}/memory/observations", {"content": "Bob is great"}, format="json")
    assert post.status_code == 403, post.content
    assert_matches_schema("POST", OBSERVATIONS, 403, post.json())
    assert selectors.markdown(agent.id) == "## People\n\n- Bob approves deploys\n"
    assert not Observation.objects.exists()


def test_the_owner_and_the_agent_itself_write_it(agent_with_token, alice):
    agent, token = agent_with_token
    owner = client_for(alice)
    assert owner.put(f"/api/agents/{agent.id}/memory", {"markdown": "## A\n\none"}, format="json").status_code == 200
    itself = APIClient()
    itself.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    saved = itself.post(f"/api/agents/{agent.id}/memory/observations", {"content": "I like tests"}, format="json")
    assert saved.status_code == 201, saved.content
    assert itself.put(f"/api/agents/{agent.id}/memory", {"markdown": "## A\n\ntwo"}, format="json").status_code == 200
    assert selectors.markdown(agent.id) == "## A\n\ntwo\n"
