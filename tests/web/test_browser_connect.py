"""In a real browser, as a person connects a coding agent (issue 36, point 3): from
/agents/ "Add an outside agent", the form, then its connect page with the token shown
once (gone after a reload); the `claude mcp add` line names this server's /mcp/ and the
token's header; the `.mcp.json` block, pasted as is, is JSON whose URL and header open a
real MCP session on the live server (initialize, tools/list); rotating from the page
shows a new token and the old one is refused at once. Screenshots in test-output/.

alice owns team Core."""

from __future__ import annotations

import json
import shlex
import threading

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from markus.agents.models import Agent

from .test_browser_work_chat import TIMEOUT, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def mcp_tools(url: str, headers: dict[str, str]) -> list[str] | int:
    """The tools an MCP session with exactly these values lists, or the HTTP status that
    refused it. In a thread of its own: Playwright's loop runs in the test's."""
    out: list = []

    async def session() -> None:
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30)) as http:
            refused = await http.post(url, json={})
            if refused.status_code == 401:
                out.append(401)
                return
            async with Client(streamable_http_client(url, http_client=http)) as client:
                out.append(sorted(t.name for t in (await client.list_tools()).tools))

    def run() -> None:
        import anyio

        anyio.run(session)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    return out[0]


def test_a_person_adds_an_outside_agent_and_its_pasted_configuration_connects(
    daphne_server, browser, alice, team, test_output
):
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors)
    page.goto(f"{base}/agents/")
    page.click("#add-outside-agent")
    page.wait_for_url("**/agents/new/")
    page.fill("#agent-name", "Claude")
    page.fill("#agent-role", "coding agent")
    page.select_option("#agent-team", team.id)
    page.click("#agent-new button[type=submit]")
    page.wait_for_url("**/connect/")
    agent = Agent.objects.get(name="Claude")
    assert agent.kind == Agent.Kind.EXTERNAL and agent.team_id == team.id and agent.owner_id == alice.pk
    token = page.inner_text("#token").strip()
    assert token.startswith("mk_")
    page.screenshot(path=str(test_output / "connect-token-once.png"), full_page=True)

    # `claude mcp add` as a shell reads it: this server's /mcp/ and the token's header.
    words = shlex.split(page.inner_text("#claude-mcp-add"))
    assert words[:6] == ["claude", "mcp", "add", "--transport", "http", "markus"]
    assert words[6:] == [f"{base}/mcp/", "--header", f"Authorization: Bearer {token}"]
    settings = json.loads(page.inner_text("#claude-settings"))
    assert settings["env"] == {"MARKUS_HUB_URL": base, "MARKUS_TOKEN": token, "MARKUS_AGENT_ID": agent.id}
    assert set(settings["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop"}

    # The .mcp.json block, pasted as is, opens a session on the live server.
    server = json.loads(page.inner_text("#mcp-json"))["mcpServers"]["markus"]
    assert server["type"] == "http"
    tools = mcp_tools(server["url"], server["headers"])
    assert isinstance(tools, list) and "inbox_wait" in tools, tools

    # Shown once: a reload shows the placeholder, nowhere the token.
    page.reload()
    assert page.locator("#token").count() == 0 and token not in page.content()
    assert "Bearer <agent token>" in page.inner_text("#claude-mcp-add")

    # Rotated from the page: a new token, once; the old one is refused at once.
    page.click("#token-rotate")
    page.wait_for_selector("#token", timeout=TIMEOUT)
    rotated = page.inner_text("#token").strip()
    assert rotated != token
    assert mcp_tools(server["url"], server["headers"]) == 401
    fresh = json.loads(page.inner_text("#mcp-json"))["mcpServers"]["markus"]
    assert "inbox_wait" in mcp_tools(fresh["url"], fresh["headers"])
    page.screenshot(path=str(test_output / "connect-rotated.png"), full_page=True)
    assert errors == []


def test_the_connect_pages_fit_a_phone_in_the_dark(daphne_server, browser, alice, team, test_output):
    from markus.agents.services import agent_create

    agent_create(name="Claude", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="claude")
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors, viewport={"width": 390, "height": 844}, color_scheme="dark")
    for path, name in (("/agents/claude/connect/", "connect"), ("/agents/new/", "agent-new")):
        page.goto(base + path)
        wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
        page.screenshot(path=str(test_output / f"phone-dark-{name}.png"), full_page=True)
        assert not wide, path
    assert errors == []
