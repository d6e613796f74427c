"""The operator sets an agent's rhythm (issue 16, item 2): ``PATCH /api/agents/{id}``
(400 with a message for a bad value, 404 for an agent the caller may not see) and the
agent's page in the console."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client
from django.urls import reverse

from markus.agents.models import Agent
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def url(agent: Agent) -> str:
    return f"/api/agents/{agent.id}/"


def fresh(agent: Agent) -> Agent:
    return Agent.objects.get(id=agent.id)


def test_the_agent_shows_its_rhythm(alice_client, agent):
    body = alice_client.get(url(agent)).json()
    assert body["heartbeatIntervalMinutes"] == 360 and body["heartbeatIntervalDefault"] is True
    assert body["timezone"] == "UTC" and body["heartbeatSleepDepth"] == 0
    assert body["heartbeatActiveStart"] is None and body["nextHeartbeatAt"] is None
    assert alice_client.get("/api/agents/").json()[0]["heartbeatIntervalMinutes"] == 360


def test_patch_sets_the_interval_and_wakes_the_agent_to_it(alice_client, agent):
    Agent.objects.filter(id=agent.id).update(
        heartbeat_sleep_depth=2, heartbeat_idle_streak=5, last_heartbeat_at=T0, next_heartbeat_at=T0 + timedelta(days=1)
    )
    with time_machine.travel(T0 + timedelta(minutes=10), tick=False):
        response = alice_client.patch(url(agent), {"heartbeatIntervalMinutes": 60}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["heartbeatIntervalMinutes"] == 60 and body["heartbeatIntervalDefault"] is False
    assert body["heartbeatSleepDepth"] == 0
    assert body["nextHeartbeatAt"].startswith("2026-12-01T10:00:00")
    a = fresh(agent)
    assert (a.heartbeat_interval_minutes, a.heartbeat_sleep_depth, a.heartbeat_idle_streak) == (60, 0, 0)


def test_patch_sets_the_time_zone_and_active_hours_and_null_restores_the_defaults(alice_client, agent):
    response = alice_client.patch(
        url(agent),
        {"timezone": "Asia/Tokyo", "heartbeatActiveStart": 9, "heartbeatActiveEnd": 18},
        format="json",
    )
    assert response.status_code == 200
    assert (response.json()["timezone"], response.json()["heartbeatActiveEnd"]) == ("Asia/Tokyo", 18)
    a = fresh(agent)
    assert (a.timezone, a.heartbeat_active_start, a.heartbeat_active_end) == ("Asia/Tokyo", 9, 18)

    response = alice_client.patch(
        url(agent),
        {"heartbeatIntervalMinutes": None, "timezone": None, "heartbeatActiveStart": None, "heartbeatActiveEnd": None},
        format="json",
    )
    assert response.status_code == 200
    a = fresh(agent)
    assert (a.heartbeat_interval_minutes, a.timezone, a.heartbeat_active_start) == (None, "", None)
    assert response.json()["heartbeatIntervalMinutes"] == 360


@pytest.mark.parametrize(
    "body,message",
    [
        ({"heartbeatIntervalMinutes": 4}, "heartbeatIntervalMinutes must be between 5 and 1440"),
        ({"heartbeatIntervalMinutes": 1441}, "heartbeatIntervalMinutes must be between 5 and 1440"),
        ({"heartbeatIntervalMinutes": "60"}, "heartbeatIntervalMinutes must be an integer"),
        ({"heartbeatIntervalMinutes": 60.5}, "heartbeatIntervalMinutes must be an integer"),
        ({"heartbeatIntervalMinutes": True}, "heartbeatIntervalMinutes must be an integer"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"timezone": 3}, "timezone must be a string"),
        ({"heartbeatActiveStart": 24, "heartbeatActiveEnd": 6}, "heartbeatActiveStart must be an hour from 0 to 23"),
        ({"heartbeatActiveStart": 9}, "active hours need both a start and an end hour"),
        ({"heartbeatActiveStart": 9, "heartbeatActiveEnd": 9}, "the start and the end hour must differ"),
        ({"nickname": "Renamed"}, "unknown field 'nickname'"),
        ({}, "nothing to change"),
    ],
)
def test_patch_with_bad_input_answers_400_with_a_message_and_changes_nothing(alice_client, agent, body, message):
    response = alice_client.patch(url(agent), body, format="json")
    assert response.status_code == 400
    assert message in response.json()["detail"]
    a = fresh(agent)
    assert (a.heartbeat_interval_minutes, a.timezone, a.heartbeat_active_start, a.name) == (None, "", None, "Ada")


def test_patch_of_an_agent_the_caller_may_not_see_answers_404(charlie_client, agent):
    assert charlie_client.patch(url(agent), {"heartbeatIntervalMinutes": 60}, format="json").status_code == 404
    assert charlie_client.patch("/api/agents/nobody/", {"heartbeatIntervalMinutes": 60}, format="json").status_code == (
        404
    )
    assert fresh(agent).heartbeat_interval_minutes is None


def test_the_console_edits_the_rhythm_on_the_agents_page(agent, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root"))
    change = reverse("admin:agents_agent_change", args=[agent.pk])
    page = client.get(change).content.decode()
    for field in ("heartbeat_interval_minutes", "timezone", "heartbeat_active_start", "heartbeat_active_end"):
        assert f'name="{field}"' in page
    assert "every 6 h" in page  # the rhythm as it is now
    Agent.objects.filter(id=agent.id).update(heartbeat_sleep_depth=2, last_heartbeat_at=T0)
    form = {
        "id": agent.id,
        "name": agent.name,
        "role": agent.role,
        "kind": agent.kind,
        "team": agent.team_id,
        "owner": agent.owner_id,
        "heartbeat_interval_minutes": "90",
        "timezone": "Europe/Berlin",
        "heartbeat_active_start": "8",
        "heartbeat_active_end": "20",
    }
    response = client.post(change, form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    a = fresh(agent)
    assert (a.heartbeat_interval_minutes, a.timezone, a.heartbeat_active_start, a.heartbeat_active_end) == (
        90,
        "Europe/Berlin",
        8,
        20,
    )
    assert a.heartbeat_sleep_depth == 0 and a.next_heartbeat_at == T0 + timedelta(minutes=90)

    bad = client.post(change, {**form, "heartbeat_interval_minutes": "2", "timezone": "Nowhere/Atlantis"})
    assert bad.status_code == 200
    errors = bad.context["adminform"].form.errors
    assert "heartbeat_interval_minutes" in errors and "unknown time zone" in str(errors["timezone"])
    assert fresh(agent).heartbeat_interval_minutes == 90


# CONTRACT: PATCH /api/agents/{id}/ {name?, role?, heartbeatIntervalMinutes?, activeHours?, timezone?}


def test_patch_renames_the_agent_and_sets_its_role(alice_client, agent):
    body = alice_client.patch(url(agent), {"name": "Ada L.", "role": "release manager"}, format="json").json()
    assert (body["name"], body["role"]) == ("Ada L.", "release manager")
    assert (fresh(agent).name, fresh(agent).role) == ("Ada L.", "release manager")


def test_patch_sets_active_hours_as_one_object_and_null_clears_them(alice_client, agent):
    body = alice_client.patch(
        url(agent), {"activeHours": {"start": 8, "end": 20}, "timezone": "Europe/Berlin"}, format="json"
    ).json()
    assert body["activeHours"] == {"start": 8, "end": 20}
    assert (body["heartbeatActiveStart"], body["heartbeatActiveEnd"]) == (8, 20)
    assert alice_client.patch(url(agent), {"activeHours": None}, format="json").json()["activeHours"] is None
    assert fresh(agent).heartbeat_active_start is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": ""}, "name"),
        ({"name": 7}, "name must be a string"),
        ({"activeHours": {"start": 8}}, "activeHours"),
        ({"activeHours": {"start": 8, "end": 24}}, "activeHours"),
        ({"activeHours": "8-20"}, "activeHours"),
        ({"activeHours": {"start": 8, "end": 20}, "heartbeatActiveStart": 9}, "activeHours"),
    ],
)
def test_bad_names_and_active_hours_answer_400_and_change_nothing(alice_client, agent, body, message):
    response = alice_client.patch(url(agent), body, format="json")
    assert response.status_code == 400 and message in response.json()["detail"]
    assert (fresh(agent).name, fresh(agent).heartbeat_active_start) == ("Ada", None)


def test_a_teammate_may_see_the_agent_but_not_change_it(bob, agent):
    bob_client = client_for(bob)  # in the agent's team, not its owner nor the team's
    assert bob_client.get(url(agent)).status_code == 200
    response = bob_client.patch(url(agent), {"name": "Mine now"}, format="json")
    assert response.status_code == 403 and "owner" in response.json()["detail"]
    assert fresh(agent).name == "Ada"


def test_widening_the_active_hours_in_the_console_brings_the_heartbeat_back_and_tells_the_mind_view(
    agent, django_user_model, sent_events, django_capture_on_commit_callbacks
):
    """An agent kept waiting for tomorrow's window returns to its rhythm once the console
    clears the window, and its watchers hear ``agent:rhythm``."""
    tomorrow = T0 + timedelta(hours=20)
    Agent.objects.filter(id=agent.id).update(
        heartbeat_active_start=22, heartbeat_active_end=23, last_heartbeat_at=T0, next_heartbeat_at=tomorrow
    )
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root"))
    form = {
        "id": agent.id,
        "name": agent.name,
        "role": agent.role,
        "kind": agent.kind,
        "team": agent.team_id,
        "owner": agent.owner_id,
        "heartbeat_interval_minutes": "",
        "timezone": "",
        "heartbeat_active_start": "",
        "heartbeat_active_end": "",
    }
    with (
        time_machine.travel(T0 + timedelta(hours=1), tick=False),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post(reverse("admin:agents_agent_change", args=[agent.pk]), form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert fresh(agent).next_heartbeat_at == T0 + timedelta(hours=6)  # the rhythm, not tomorrow's window
    assert any(e["type"] == "agent:rhythm" and e["agentId"] == agent.id for _, e in sent_events)
