"""``GET /api/agents/{id}/decisions`` and ``GET /api/agents/{id}/activity-logs?activityId=``
read what a real run of the loop wrote: the decisions newest first with their item,
reasoning and outcome, paged by limit and offset with the total; an activity's logs in
order (started, each LLM request, each tool call and its result, the text, the end).
Another agent's records stay out; a foreign or missing activity answers 404.
alice owns ada (team Core, bob a member), charlie is an outsider."""

from __future__ import annotations

import pytest

from attention import loop
from attention.models import AgentActivity, AgentDecision
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from tests.conftest import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def run(agent, turns: list[Turn], *summaries: str) -> list[str]:
    provider = ScriptedProvider(turns)
    set_provider_override(provider)
    try:
        items = [
            mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": s}).id for s in summaries
        ]
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    return items


@pytest.fixture
def worked(agent, alice, team):
    """ada handled two notices: the first with a tool call, the second with a text; bea,
    another agent of the team, one notice of her own."""
    items = run(
        agent,
        [
            Turn(tool_calls=[("update_working_memory", {"key": "deploy", "content": "Tuesday"})]),
            Turn(text="Noted the deploy day"),
            Turn(text="Nothing to do"),
        ],
        "deploy moved",
        "coffee machine",
    )
    bea = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)[0]
    run(bea, [Turn(text="bea's answer")], "bea's notice")
    return items, bea


def test_the_decisions_are_the_runs_own_newest_first_with_their_item_and_reasoning(alice_client, agent, worked):
    items, _ = worked
    body = alice_client.get(f"/api/agents/{agent.id}/decisions").json()
    stored = AgentDecision.objects.filter(agent=agent).count()
    assert body["totalCount"] == stored >= 2
    decisions = body["decisions"]
    assert {d["agentId"] for d in decisions} == {agent.id}
    assert [d["createdAt"] for d in decisions] == sorted((d["createdAt"] for d in decisions), reverse=True)
    for_items = {d["mailboxItemId"] for d in decisions}
    assert set(items) <= for_items  # a decision for each item it handled
    assert set(decisions[0]) >= {"id", "decisionType", "mailboxItemId", "context", "reasoning", "outcome", "createdAt"}
    assert all(d["decisionType"] and d["reasoning"] for d in decisions)


def test_the_decisions_page_by_limit_and_offset_and_keep_the_total(alice_client, agent, worked):
    every = alice_client.get(f"/api/agents/{agent.id}/decisions").json()["decisions"]
    first = alice_client.get(f"/api/agents/{agent.id}/decisions?limit=1").json()
    second = alice_client.get(f"/api/agents/{agent.id}/decisions?limit=1&offset=1").json()
    assert [d["id"] for d in first["decisions"]] == [every[0]["id"]]
    assert [d["id"] for d in second["decisions"]] == [every[1]["id"]]
    assert first["totalCount"] == second["totalCount"] == len(every)
    bad = alice_client.get(f"/api/agents/{agent.id}/decisions?limit=0")
    assert bad.status_code == 400 and "limit" in bad.json()["fields"]


def test_an_activity_logs_read_in_order_with_the_tool_call_and_its_result(alice_client, agent, worked):
    items, _ = worked
    activity = AgentActivity.objects.get(mailbox_item_id=items[0])
    body = alice_client.get(f"/api/agents/{agent.id}/activity-logs?activityId={activity.id}").json()
    assert body["activityId"] == activity.id
    logs = body["logs"]
    assert [entry["seq"] for entry in logs] == list(range(1, len(logs) + 1))
    types = [entry["type"] for entry in logs]
    assert types[0] == "status" and types[-1] == "status"
    assert types.index("llm_request") < types.index("tool_start") < types.index("tool_end") < types.index("text")
    start = logs[types.index("tool_start")]
    assert start["content"] == "update_working_memory"
    assert start["metadata"]["arguments"] == {"key": "deploy", "content": "Tuesday"}
    end = logs[types.index("tool_end")]
    assert end["metadata"]["ok"] is True and end["metadata"]["callId"] == start["metadata"]["callId"]
    assert logs[types.index("text")]["content"] == "Noted the deploy day"
    assert all(entry["createdAt"] for entry in logs)


def test_a_teammate_reads_them_and_an_outsider_gets_404(agent, bob, charlie_client, worked):
    items, _ = worked
    activity = AgentActivity.objects.get(mailbox_item_id=items[1])
    teammate = client_for(bob)
    assert teammate.get(f"/api/agents/{agent.id}/decisions").status_code == 200
    logs = teammate.get(f"/api/agents/{agent.id}/activity-logs?activityId={activity.id}")
    assert logs.status_code == 200 and [e["content"] for e in logs.json()["logs"] if e["type"] == "text"] == [
        "Nothing to do"
    ]
    assert charlie_client.get(f"/api/agents/{agent.id}/decisions").status_code == 404
    assert charlie_client.get(f"/api/agents/{agent.id}/activity-logs?activityId={activity.id}").status_code == 404


def test_another_agents_activity_is_not_found_under_this_agent_and_the_id_is_required(alice_client, agent, worked):
    _, bea = worked
    theirs = AgentActivity.objects.get(agent=bea)
    assert alice_client.get(f"/api/agents/{bea.id}/activity-logs?activityId={theirs.id}").status_code == 200
    foreign = alice_client.get(f"/api/agents/{agent.id}/activity-logs?activityId={theirs.id}")
    assert foreign.status_code == 404 and foreign.json()["code"] == "not_found"
    assert alice_client.get(f"/api/agents/{agent.id}/activity-logs?activityId=act_missing").status_code == 404
    missing = alice_client.get(f"/api/agents/{agent.id}/activity-logs")
    assert missing.status_code == 400 and "activityId" in missing.json()["detail"]
