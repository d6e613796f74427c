"""Shared fixtures: named personas (alice owns the agents, bob is a teammate, charlie
an outsider) and API clients for them."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from markus.agents.models import Team
from markus.agents.services import agent_create
from markus.core import events

# The live server and browser fixtures (tests/browser.py), shared by every app's tests.
pytest_plugins = ["tests.browser"]


@pytest.fixture(autouse=True)
def no_channel_left_in_a_group():
    """Every test leaves the embedded layer's groups as it found them: a channel left in
    a group is counted and fed by every later test of the process (a fan-out test that
    counted one such channel failed in another test's wake). Failing here names the test
    that left it."""
    from channels.layers import get_channel_layer

    from markus.core.channel_layer import ThreadSafeInMemoryChannelLayer

    yield
    layer = get_channel_layer()
    if type(layer) is ThreadSafeInMemoryChannelLayer:
        left = {group: sorted(members) for group, members in layer.groups.items() if members}
        assert not left, f"channels this test left in groups: {left}"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob")


@pytest.fixture
def charlie(django_user_model):
    return django_user_model.objects.create_user("charlie", password="pw-charlie")


@pytest.fixture
def team(alice, bob):
    t = Team.objects.create(name="Core", owner=alice)
    t.members.add(bob)
    return t


@pytest.fixture
def agent(alice, team):
    a, _ = agent_create(name="Ada", role="engineer", owner=alice, team=team, agent_id="ada")
    return a


@pytest.fixture
def agent_with_token(alice, team):
    return agent_create(name="Tok", role="engineer", owner=alice, team=team, agent_id="tok")


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def alice_client(alice):
    return client_for(alice)


@pytest.fixture
def charlie_client(charlie):
    return client_for(charlie)


@pytest.fixture
def model_server(settings, monkeypatch):
    """Point the brain at a local model server, through the real SDK:
    ``model_server(url)`` (openai), ``model_server(url, provider="anthropic")``; any other
    ``MARKUS`` setting as a keyword (``DELIBERATION=False``)."""

    def use(url: str, *, provider: str = "openai", **markus: object) -> None:
        values = {"LLM_PROVIDER": provider, "LLM_BASE_URL": url, "LLM_API_KEY": "sk-test", "LLM_MODEL": "stub-model"}
        for key, value in {**values, **markus}.items():
            monkeypatch.setitem(settings.MARKUS, key, value)

    return use


@pytest.fixture
def sent_events():
    """Every event sent after commit, round-tripped through JSON."""
    seen: list[tuple[str, dict]] = []

    def listener(group, event):
        seen.append((group, json.loads(json.dumps(event))))

    events.add_listener(listener)
    yield seen
    events.remove_listener(listener)


@pytest.fixture
def unrecorded_templates(monkeypatch):
    """The test client keeps no copy of each rendered template's context
    (``response.context``, ``response.templates`` stay empty). For sweeps that send
    thousands of requests and read only the status: the client copies the context of
    every template a page renders, each widget's included (about a seventh of the
    console's form sweep: 139 s → 120 s)."""
    from django.test import client

    monkeypatch.setattr(client, "store_rendered_templates", lambda store, signal, sender, template, context, **kw: None)
