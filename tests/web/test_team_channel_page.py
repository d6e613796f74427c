"""A team's channel on a page: the team's people read its messages (the newest last,
"Load earlier" by sequence), its running members are listed, another team answers
404, and the page is linked from the teams list, the top bar and the agents' cards.
alice owns team Core and its agent ada, bob is a member, charlie an outsider."""

from __future__ import annotations

import pytest
from django.test import Client

from agentbus.models import Stream
from agentbus.services import stream_append
from agentbus.team_channel import team_channel_id
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.web import team_pages

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def bea(alice, team) -> Agent:
    return agent_create(name="Bea", agent_id="bea", owner=alice, team=team)[0]


def say(agent: Agent, text: str):
    return stream_append(stream_id=team_channel_id(agent.team_id), sender=agent, payload={"text": text})


def test_the_team_people_read_the_channel_with_the_newest_messages_last(alice, bob, team, agent, bea):
    say(agent, "Build is **green**")
    say(bea, "Deploying now")
    for user in (alice, bob):
        response = signed_in(user).get(f"/teams/{team.id}/channel/")
        assert response.status_code == 200
        page = response.content.decode()
        assert page.index("<strong>green</strong>") < page.index("Deploying now")
        assert "Ada" in page and "Bea" in page and "Load earlier" not in page
        assert f'href="/agents/{agent.id}/mind/"' in page  # the members, linked to their minds


def test_an_outsider_and_a_missing_team_answer_404_and_nobody_signed_out_gets_in(charlie, team, agent):
    assert signed_in(charlie).get(f"/teams/{team.id}/channel/").status_code == 404
    assert signed_in(charlie).get(f"/teams/{team.id}/channel/messages/?before=5").status_code == 404
    assert signed_in(charlie).get("/teams/team_nope/channel/").status_code == 404
    anonymous = Client().get(f"/teams/{team.id}/channel/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_staff_see_every_team_and_owning_an_agent_of_it_is_not_enough(django_user_model, charlie, team):
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    agent_create(name="Zed", agent_id="zed", owner=charlie, team=team)
    assert signed_in(staff).get(f"/teams/{team.id}/channel/").status_code == 200
    assert signed_in(charlie).get(f"/teams/{team.id}/channel/").status_code == 404


def test_load_earlier_pages_back_by_sequence_to_the_first_message(alice, team, agent):
    for i in range(team_pages.PAGE + 5):
        say(agent, f"note {i}.")
    client = signed_in(alice)
    page = client.get(f"/teams/{team.id}/channel/").content.decode()
    assert f"note {team_pages.PAGE + 4}." in page and "note 4." not in page and "note 5." in page
    cursor = page.split("before=")[1].split('"')[0]
    assert cursor == "6"  # the sequence of the oldest message shown ("note 5.")
    earlier = client.get(f"/teams/{team.id}/channel/messages/?before={cursor}").content.decode()
    assert "note 0." in earlier and "note 4." in earlier and "note 5." not in earlier
    assert "Load earlier" not in earlier
    bad = client.get(f"/teams/{team.id}/channel/messages/?before=x")
    assert bad.status_code == 400 and b"sequence" in bad.content


def test_the_members_listed_are_the_running_agents(alice, team, agent, bea):
    from attention.services import agent_pause

    agent_pause(bea)
    page = signed_in(alice).get(f"/teams/{team.id}/channel/").content.decode()
    members = page.split('id="members"')[1].split("</ul>")[0]
    assert "Ada" in members and "Bea" not in members


def test_a_team_without_a_channel_gets_one_when_its_page_is_first_opened(alice):
    (team,) = Team.objects.bulk_create([Team(name="Raw", owner=alice)])
    assert signed_in(alice).get(f"/teams/{team.id}/channel/").status_code == 200
    assert Stream.objects.filter(id=team_channel_id(team.id)).exists()


def test_the_channel_is_linked_from_the_teams_list_the_top_bar_and_the_agent_cards(alice, charlie, team, agent):
    say(agent, "hello")
    Team.objects.create(name="Hidden", owner=charlie)
    client = signed_in(alice)
    teams = client.get("/teams/").content.decode()
    assert f'href="/teams/{team.id}/channel/"' in teams and "Core channel" in teams and "Hidden" not in teams
    assert "1 agent" in teams and "last message" in teams
    home = client.get("/").content.decode()
    assert 'href="/teams/"' in home and f'href="/teams/{team.id}/channel/"' in home
    assert f'href="/teams/{team.id}/channel/"' in client.get("/agents/").content.decode()


def test_an_open_page_reads_the_newer_messages_after_the_last_one_it_shows(alice, team, agent, bea):
    say(agent, "first")
    client = signed_in(alice)
    page = client.get(f"/teams/{team.id}/channel/").content.decode()
    assert f'/teams/{team.id}/channel/messages/?after=1"' in page and 'hx-trigger="every 10s"' in page
    nothing = client.get(f"/teams/{team.id}/channel/messages/?after=1").content.decode()
    assert "msg-" not in nothing and "?after=1" in nothing  # the next poll asks from the same place
    say(bea, "second")
    say(agent, "third")
    newer = client.get(f"/teams/{team.id}/channel/messages/?after=1").content.decode()
    assert newer.index("second") < newer.index("third") and "first" not in newer
    assert "?after=3" in newer
    assert client.get(f"/teams/{team.id}/channel/messages/?after=-1").status_code == 400
