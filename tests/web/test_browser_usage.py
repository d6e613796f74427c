"""In a real browser, at a desktop's width and a phone's (390 px): an agent's usage page
shows both charts (inline SVG, the limit drawn as a line) and the table; its owner sets
the agent's budget from the page, a bad value comes back with the API's message and the
input kept, a good one redraws the limit with what is left; nothing scrolls sideways.
Screenshots in test-output/.

alice owns team Core and its agent ada."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from markus.usage.models import Budget, LLMCall

from .test_browser_work_chat import TIMEOUT, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_owner_reads_the_charts_and_sets_a_budget(daphne_server, browser, alice, agent, test_output, width):
    for days_ago in range(5):
        LLMCall.objects.create(
            agent=agent,
            team=agent.team,
            model="gpt-x",
            scenario="human_chat",
            input_tokens=400 + 100 * days_ago,
            output_tokens=150,
            cost=Decimal("0.0200"),
            created_at=timezone.now() - timedelta(days=days_ago),
        )
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors, viewport={"width": width, "height": 900})
    page.goto(f"{base}/agents/ada/mind/")
    page.click("#usage-link")
    page.wait_for_url("**/agents/ada/usage/", timeout=TIMEOUT)
    assert page.locator(".usage-chart svg").count() == 2
    assert page.locator(".usage-chart rect.bar-input").count() == 5
    assert page.locator("#usage-table tbody tr").count() == 5
    chart_width = page.locator(".usage-chart svg").first.bounding_box()["width"]
    assert chart_width > width * 0.6  # the chart takes the page's width

    form = page.locator("#budget-agent form")
    form.locator("input[name=dailyTokens]").fill("12x")
    form.locator("button").click()
    page.wait_for_selector("#budget-error-agent", timeout=TIMEOUT)
    assert "dailyTokens" in page.inner_text("#budget-error-agent")
    assert page.locator("#budget-agent input[name=dailyTokens]").input_value() == "12x"
    errors.remove(f"400 {base}/agents/ada/usage/")  # the refusal itself

    page.locator("#budget-agent input[name=dailyTokens]").fill("2000")
    page.locator("#budget-agent form button").click()
    page.wait_for_selector("#budget-saved", timeout=TIMEOUT)
    assert Budget.objects.get(agent=agent).daily_tokens == 2000
    assert page.locator(".usage-chart line.limit").count() == 1
    assert "agent: 2,000 tokens a day, 1,450 left today" in page.inner_text(".usage-limits")
    wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
    page.screenshot(path=str(test_output / f"usage-agent-{width}.png"), full_page=True)
    assert not wide
    assert errors == []
