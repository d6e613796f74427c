"""Budgets stop an agent's LLM work at the limit and nothing is lost (issue 26): reached
mid-burst, no further LLM call is made, the rest of the burst waits queued, the owner is
told once; raising the budget or the next day resumes it; a team's cap holds over two
agents; informational items still complete; heartbeats are skipped first near the
limit. Time is frozen with time_machine (ticking from a fixed instant)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.usage.models import LLMCall
from markus.usage.services import budget_set
from notifications.models import UserNotification
from notifications.registry import NotificationType

from .conftest import PER_CALL, llm_requests, notices, statuses

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def exhausted_notices(user) -> list[UserNotification]:
    return list(UserNotification.objects.filter(user=user, type=NotificationType.BUDGET_EXHAUSTED).order_by("id"))


def test_the_limit_reached_mid_burst_stops_llm_calls_keeps_the_items_queued_and_tells_the_owner_once(
    agent, alice, stub
):
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": 2 * PER_CALL})
        notices(agent, 5)

        result = loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"
        assert result.run_again_in is None  # no busy loop: the sweep and a raise wake it
        assert llm_requests(stub) == 2
        assert statuses(agent) == {"completed": 2, "queued": 3}
        assert LLMCall.objects.filter(agent=agent).count() == 2
        [told] = exhausted_notices(alice)
        assert "daily token budget of the agent ada" in told.body.lower()

        again = loop.run_attention(agent.id, budget=10)  # the sweep's kick, later the same day

        assert again.status == "blocked"
        assert llm_requests(stub) == 2
        assert statuses(agent) == {"completed": 2, "queued": 3}
        assert len(exhausted_notices(alice)) == 1


def test_raising_the_budget_through_the_api_wakes_the_agent_and_the_waiting_items_run(
    agent, alice, alice_client, stub, monkeypatch
):
    woken: list[str] = []
    monkeypatch.setattr("markus.agents.api.wake", lambda agent_id, **kw: woken.append(agent_id))
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": 2 * PER_CALL})
        notices(agent, 5)
        loop.run_attention(agent.id, budget=10)
        assert statuses(agent) == {"completed": 2, "queued": 3}

        response = alice_client.patch(f"/api/agents/{agent.id}/", {"budget": {"dailyTokens": 100_000}}, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["budget"] == {"dailyTokens": 100_000, "monthlyCost": None}
        assert woken == [agent.id]
        result = loop.run_attention(agent.id, budget=10)  # what the wake-up runs
        assert result.status == "done"
        assert llm_requests(stub) == 5
        assert statuses(agent) == {"completed": 5}


def test_the_next_day_resumes_the_waiting_items_and_a_new_period_tells_the_owner_again(agent, alice, stub):
    with time_machine.travel(T0, tick=True) as traveller:
        budget_set(agent=agent, limits={"dailyTokens": 2 * PER_CALL})
        notices(agent, 5)
        loop.run_attention(agent.id, budget=10)
        assert statuses(agent) == {"completed": 2, "queued": 3}

        traveller.shift(timedelta(days=1))
        result = loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"  # two more today, then the limit again
        assert llm_requests(stub) == 4
        assert statuses(agent) == {"completed": 4, "queued": 1}
        periods = [n.metadata["period"] for n in exhausted_notices(alice)]
        assert periods == ["2026-12-02", "2026-12-03"]


def test_a_team_cap_holds_over_two_agents_and_its_owner_is_told_once(agent, bea, alice, team, stub):
    with time_machine.travel(T0, tick=True):
        budget_set(team=team, limits={"dailyTokens": 3 * PER_CALL})
        notices(agent, 2)
        notices(bea, 2)

        loop.run_attention(agent.id, budget=10)  # ada spends two calls of the team's three
        first = loop.run_attention(bea.id, budget=10)  # bea gets the third, then the cap
        second = loop.run_attention(agent.id, budget=10)

        assert llm_requests(stub) == 3
        assert statuses(agent) == {"completed": 2}
        assert statuses(bea) == {"completed": 1, "queued": 1}
        assert first.status == "blocked" and second.status == "done"
        assert set(LLMCall.objects.values_list("team_id", flat=True)) == {team.id}
        [told] = exhausted_notices(alice)
        assert told.metadata["scope"] == "team"


def test_a_monthly_cost_limit_stops_the_agent_as_the_token_limit_does(agent, alice, stub):
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"monthlyCost": "0.0003"})  # two calls cost 0.00032
        notices(agent, 4)

        result = loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"
        assert llm_requests(stub) == 2
        [told] = exhausted_notices(alice)
        assert told.metadata == {"scope": "agent", "scopeId": agent.id, "kind": "monthlyCost", "period": "2026-12"}


def test_informational_items_still_complete_while_the_budget_is_used_up(agent, stub):
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": 0})
        [waiting] = notices(agent, 1, priority=1)
        note = mailbox_enqueue(
            agent_id=agent.id,
            source_type=T.REQUIREMENT_UPDATE,
            priority=3,
            payload={"summary": "requirement approved", "content": "approved"},
        )

        result = loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"
        assert llm_requests(stub) == 0
        assert MailboxItem.objects.get(id=note.id).status == "completed"
        assert MailboxItem.objects.get(id=waiting.id).status == "queued"


def test_near_the_limit_a_heartbeat_is_skipped_first_and_other_work_goes_on(agent, stub, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "BUDGET_NEAR_SHARE", 0.5)
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": 3 * PER_CALL})
        notices(agent, 2, priority=2)  # 240 of 360 after these: past half
        loop.run_attention(agent.id, budget=10)
        beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, priority=1, payload={"summary": "now"})
        [work] = notices(agent, 1, priority=2)

        loop.run_attention(agent.id, budget=10)

        assert MailboxItem.objects.get(id=beat.id).status == "completed"
        assert MailboxItem.objects.get(id=work.id).status == "completed"
        assert llm_requests(stub) == 3  # the two, the work; no heartbeat call
        assert not LLMCall.objects.filter(scenario="check_in").exists()
        said = ChatMessage.objects.filter(session=main_session(agent.id)).values_list("content", flat=True)
        assert any("skipped: the daily token budget" in line and "240 of 360" in line for line in said), list(said)


def test_the_limit_reached_between_two_turns_of_one_item_sends_it_back_to_the_queue_with_its_session(
    agent, alice, stub, monkeypatch
):
    from attention.models import AgentDecision, LLMSession

    def two_turns(body):  # a tool first (any offered one that only reads), then the answer
        if body["messages"][-1]["role"] == "tool":
            return {"content": "done"}
        offered = [t["function"]["name"] for t in body.get("tools") or []]
        return {"tool_calls": [("memory_search" if "memory_search" in offered else offered[0], {"query": "x"})]}

    stub.chooser = two_turns
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": PER_CALL})
        [item] = notices(agent, 1)

        result = loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"
        assert llm_requests(stub) == 1  # the second turn was never asked
        assert MailboxItem.objects.get(id=item.id).status == "queued"
        session = LLMSession.objects.get(mailbox_item_id=item.id)
        assert session.turn_count == 1  # it resumes where it stopped
        assert len(exhausted_notices(alice)) == 1
        pause = AgentDecision.objects.get(mailbox_item_id=item.id, decision_type="pause")
        assert pause.reasoning.startswith("Stopped mid-run: the daily token budget of the agent ada is used up")

        budget_set(agent=agent, limits={"dailyTokens": 10 * PER_CALL})
        loop.run_attention(agent.id, budget=10)

        assert MailboxItem.objects.get(id=item.id).status == "completed"
        assert llm_requests(stub) == 2  # only the second turn: the first was not asked again
