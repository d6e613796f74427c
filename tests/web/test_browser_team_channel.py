"""In a real browser: a person goes from the agents' cards to their team's channel,
reads what the agents said there (the newest last), loads the earlier messages with
"Load earlier" until the first one, sees a new one arrive without a reload, and the
page fits a phone in the dark. The agents'
side (messages on the channel) is made through the bus, as agent_send_group_message
makes it. Screenshots in test-output/.

alice owns agent ada (team Core, bob a member); bea is a second agent of the team."""

from __future__ import annotations

import pytest

from agentbus.services import stream_append
from agentbus.team_channel import team_channel_id
from markus.agents.services import agent_create
from markus.web import team_pages

from .test_browser_work_chat import TIMEOUT, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_person_opens_the_team_channel_from_an_agent_card_and_loads_earlier_and_newer_messages(
    daphne_server, browser, bob, team, agent, test_output, monkeypatch
):
    monkeypatch.setattr(team_pages, "POLL_SECONDS", 1)  # the server runs in this process
    base = daphne_server.url
    bea = agent_create(name="Bea", agent_id="bea", team=team, owner=team.owner)[0]
    channel = team_channel_id(team.id)
    total = team_pages.PAGE + 4
    for i in range(total):
        sender = agent if i % 2 == 0 else bea
        stream_append(stream_id=channel, sender=sender, payload={"text": f"Update {i}: step **{i}** done"})
    errors: list[str] = []
    page = signed_in(browser, base, bob, errors)
    page.goto(f"{base}/agents/")
    page.click(f"#agent-{agent.id} a.team-link")
    page.wait_for_url(f"**/teams/{team.id}/channel/")
    assert page.locator("#messages .msg").count() == team_pages.PAGE
    last = page.locator("#messages .msg").last
    assert "Update 33" in last.inner_text() and "Bea" in last.inner_text()
    assert page.locator("#members li").all_inner_texts()[0].startswith("Ada")
    page.click("#load-earlier button")
    page.wait_for_selector("#msg-1", timeout=TIMEOUT)
    assert page.locator("#messages .msg").count() == total
    assert page.locator("#load-earlier").count() == 0  # the first message is there: nothing earlier
    first = page.locator("#messages .msg").first
    assert "Update 0" in first.inner_text() and first.locator("strong").inner_text() == "0"
    # A message on the channel shows up on the open page by itself, last.
    page.evaluate("window.__stayed = true")
    stream_append(stream_id=channel, sender=bea, payload={"text": "Release **tagged**"})
    page.wait_for_selector(f"#msg-{total + 1} >> text=Release", timeout=TIMEOUT)
    assert "Release tagged" in page.locator("#messages .msg").last.inner_text()
    assert page.evaluate("window.__stayed === true")  # no reload
    page.screenshot(path=str(test_output / "team-channel.png"), full_page=True)
    assert errors == []


def test_the_team_pages_fit_a_phone_in_the_dark(daphne_server, browser, alice, team, agent, test_output):
    stream_append(stream_id=team_channel_id(team.id), sender=agent, payload={"text": "A long line " * 40})
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors, viewport={"width": 390, "height": 844}, color_scheme="dark")
    for path, name in ((f"/teams/{team.id}/channel/", "team-channel"), ("/teams/", "teams")):
        page.goto(base + path)
        wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
        page.screenshot(path=str(test_output / f"phone-dark-{name}.png"), full_page=True)
        assert not wide, path
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") != "rgb(255, 255, 255)"
    assert errors == []
