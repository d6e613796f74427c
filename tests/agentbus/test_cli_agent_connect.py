"""``manage.py agent connect`` / ``rotate-token`` / ``revoke-token`` (issue 36, point 3),
on the local database and against a hub with a user's token: an outside agent with its
token printed once beside the connect page's configuration, naming the server; a rotated
token replaces the old one at once; a revoked one acts as nobody. Against a hub the hub's
rules hold (a teammate may not rotate: 403).

alice owns team Core (bob a member); eve is an outside agent of alice's."""

from __future__ import annotations

import io
import shlex

import pytest
from django.core.management import call_command

from markus.agents.auth import agent_for_token
from markus.agents.models import Agent
from markus.agents.services import user_token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


def base_of(cli) -> str:
    return cli.hub_url if cli.mode == "hub" else "http://127.0.0.1:8000"


def test_connect_creates_an_outside_agent_and_prints_its_token_once_with_its_configuration(
    cli, alice, team, alice_token
):
    local = ["--owner", "alice"] if cli.mode == "local" else []
    out = cli(
        "agent",
        "connect",
        "Claude",
        "--role",
        "coding agent",
        "--team",
        team.id,
        "--id",
        "claude",
        *local,
        token=alice_token,
    )
    agent = Agent.objects.get(id="claude")
    assert (agent.kind, agent.team_id, agent.owner_id, agent.role) == ("external", team.id, alice.pk, "coding agent")
    assert out["id"] == "claude" and agent_for_token(out["token"]) == agent
    words = shlex.split(out["snippets"]["claudeMcpAdd"])
    assert words[-3:] == [f"{base_of(cli)}/mcp/", "--header", f"Authorization: Bearer {out['token']}"]
    assert out["snippets"]["mcpUrl"] == f"{base_of(cli)}/mcp/"
    assert '"MARKUS_AGENT_ID": "claude"' in out["snippets"]["claudeSettings"]
    assert out["snippets"]["a2aCard"] == f"{base_of(cli)}/a2a/claude/.well-known/agent-card.json"


def test_rotate_token_replaces_the_old_one_at_once_and_revoke_token_leaves_none(cli, eve, alice_token):
    out = cli("agent", "rotate-token", "eve", token=alice_token)
    assert agent_for_token(eve.token) is None and agent_for_token(out["token"]).id == "eve"
    assert out["token"] in out["snippets"]["mcpHeader"]
    assert cli("agent", "revoke-token", "eve", token=alice_token) == {"id": "eve", "revoked": True}
    assert agent_for_token(out["token"]) is None and Agent.objects.get(id="eve").token_hash is None


def test_a_refused_connect_says_why_in_one_line(cli, eve, team, alice_token):
    assert "id not available" in cli.fails("agent", "connect", "Again", "--id", "eve", token=alice_token)
    assert "no such agent" in cli.fails("agent", "rotate-token", "ghost", token=alice_token).lower()


def test_against_a_hub_a_teammate_may_not_rotate_and_the_agent_may_not_rotate_itself(hub, bob, eve):
    from .conftest import Cli

    remote = Cli("hub", hub.url)
    refusal = "Only its owner, its team's owner and staff"
    assert refusal in remote.fails("agent", "rotate-token", "eve", token=user_token_create(bob)[1])
    assert refusal in remote.fails("agent", "revoke-token", "eve", token=eve.token)
    assert agent_for_token(eve.token).id == "eve"


def test_text_prints_blocks_to_copy(alice, team):
    out = io.StringIO()
    call_command(
        "agent", "connect", "Claude", "--team", team.id, "--text", "--base-url", "https://markus.example", stdout=out
    )
    text = out.getvalue()
    token = text.split("shown this once: ", 1)[1].split()[0]
    assert agent_for_token(token) == Agent.objects.get(name="Claude")
    assert (
        f'claude mcp add --transport http markus https://markus.example/mcp/ --header "Authorization: Bearer {token}"'
        in text
    )
