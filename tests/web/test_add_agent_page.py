"""Adding an agent Markus runs from the pages (issue 37, point 4): /agents/new/ asks
which kind, outside (its connect page and token next, as before) or internal (the
attention loop runs it: its mind view next); the same rules as POST /api/agents/.

alice owns team Core (bob a member)."""

from __future__ import annotations

import pytest

from markus.agents.models import Agent

from .conftest import signed_in

pytestmark = pytest.mark.django_db


def test_an_internal_agent_is_added_and_its_mind_view_follows(alice, team):
    response = signed_in(alice).post("/agents/new/", {"name": "Grace", "kind": "internal", "teamId": team.id})
    agent = Agent.objects.get(name="Grace")
    assert (agent.kind, agent.team, agent.owner) == (Agent.Kind.INTERNAL, team, alice)
    assert response.status_code == 302 and response["Location"] == f"/agents/{agent.id}/mind/"


def test_the_form_offers_both_kinds_and_keeps_the_choice_on_error(alice, team):
    page = signed_in(alice).get("/agents/new/").content.decode()
    assert 'value="internal"' in page and 'value="external"' in page
    refused = signed_in(alice).post("/agents/new/", {"name": "", "kind": "internal", "teamId": team.id})
    assert refused.status_code == 400 and 'value="internal" selected' in refused.content.decode()


def test_an_unknown_kind_is_refused_with_the_apis_message(alice, team):
    refused = signed_in(alice).post("/agents/new/", {"name": "X", "kind": "robot", "teamId": team.id})
    assert refused.status_code == 400 and "kind" in refused.content.decode()
    assert not Agent.objects.filter(name="X").exists()


def test_without_a_kind_it_is_an_outside_agent_as_before(alice, team):
    response = signed_in(alice).post("/agents/new/", {"name": "Claude", "teamId": team.id})
    assert Agent.objects.get(name="Claude").kind == Agent.Kind.EXTERNAL
    assert response["Location"].endswith("/connect/")
