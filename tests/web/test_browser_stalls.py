"""Why is it stuck, in a real browser (the system Chromium against daphne in this
process): a stalled agent's card on /agents/ and its mind view say why and since when,
and the owner's bell rings once when the beat's check tells them."""

from __future__ import annotations

import pytest

from attention.stalls import notify_stalls
from markus.agents.services import agent_create
from tests.agents.test_stalls import call, focus

from .test_browser_rhythm import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_card_and_the_mind_view_say_why_and_the_bell_rings_once(
    daphne_server, browser, alice, agent, team, test_output
):
    focus(agent, minutes_ago=25)  # ada: the same item for 25 minutes
    bo, _ = agent_create(name="Bo", owner=alice, team=team, agent_id="bo")
    item = focus(bo, minutes_ago=1)
    for turn in range(3):
        call(item, "web_fetch", False, turn)  # bo: the same tool failing
    agent_create(name="Calm", owner=alice, team=team, agent_id="calm")
    base = daphne_server.url
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    sign_in(page, base, "alice", "/agents/")

    assert page.locator("#agent-ada .agent-stall").inner_text() == "⏳ Stuck: on the same system event for 25 min"
    assert page.locator("#agent-bo .agent-stall").get_attribute("data-stall") == "tool_failing"
    assert "web_fetch failed 3 times in a row" in page.locator("#agent-bo .agent-stall").inner_text()
    assert page.locator("#agent-calm .agent-stall").count() == 0
    page.screenshot(path=str(test_output / "agents-stalled.png"), full_page=True)

    page.goto(f"{base}/agents/{agent.id}/mind/")
    page.locator("#live.on").wait_for(timeout=15_000)
    assert "Stuck: on the same system event for 25 min" in page.locator("#mind-stall").inner_text()
    page.locator('#bell[data-live="on"]').wait_for(timeout=15_000)
    before = int(page.locator("#bell-count").get_attribute("data-unread") or 0)
    assert len(notify_stalls()) == 2  # ada's and bo's, to alice
    page.locator(f'#bell-count[data-unread="{before + 2}"]').wait_for(timeout=15_000)
    assert notify_stalls() == []  # once per stall
    page.screenshot(path=str(test_output / "mind-stalled.png"), full_page=True)
