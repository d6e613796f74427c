"""Why is it stuck? (``attention.stalls``): an agent that has made no progress for a
while (the same tool failing, the same item too long, a person's answer awaited for a
day) shows the reason in the API's ``stall``, on its card and in the mind view, read in
the same statements for any number of agents; its owner is told once per stall."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attention.models import AgentAttention, AttentionState, ToolCallRecord
from attention.stalls import notify_stalls, stalls_of
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from notifications.models import Approval, UserNotification
from notifications.registry import NotificationType

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


@pytest.fixture(autouse=True)
def thresholds(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "STALL_SECONDS", 600)
    monkeypatch.setitem(settings.MARKUS, "STALL_TOOL_FAILURES", 3)
    monkeypatch.setitem(settings.MARKUS, "STALL_WAIT_SECONDS", 86_400)


def focus(agent, *, minutes_ago: float, summary: str = "the build") -> MailboxItem:
    """The agent holds a task item (live lease) since ``minutes_ago``."""
    started = timezone.now() - timedelta(minutes=minutes_ago)
    item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": summary})
    MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING, started_at=started)
    AgentAttention.objects.update_or_create(
        agent=agent,
        defaults={
            "state": AttentionState.FOCUSED,
            "lease_owner": "worker-1",
            "lease_expires_at": timezone.now() + timedelta(minutes=1),
            "current_item": item,
            "focus_started_at": started,
        },
    )
    return item


def call(item, name: str, ok: bool | None, turn: int) -> None:
    ToolCallRecord.objects.create(mailbox_item=item, attempt="att", turn=turn, position=0, name=name, ok=ok)


def ask(agent, user, *, hours_ago: float) -> Approval:
    return Approval.objects.create(
        user=user, agent=agent, title="Deploy?", created_at=timezone.now() - timedelta(hours=hours_ago)
    )


def kind(agent) -> str | None:
    stall = stalls_of([agent.id])[agent.id]
    return stall.kind if stall else None


def test_an_agent_at_work_on_a_fresh_item_is_not_stalled(agent):
    item = focus(agent, minutes_ago=2)
    call(item, "web_fetch", False, 1)
    call(item, "web_fetch", False, 2)  # twice: not yet
    assert stalls_of([agent.id]) == {agent.id: None}


def test_the_same_item_past_the_setting_is_a_stall_with_its_start(agent, monkeypatch):
    item = focus(agent, minutes_ago=11)
    stall = stalls_of([agent.id])[agent.id]
    assert stall.kind == "long_focus" and stall.since == MailboxItem.objects.get(id=item.id).started_at
    assert stall.reason == "on the same system event for 11 min"
    monkeypatch.setitem(settings.MARKUS, "STALL_SECONDS", 3600)
    assert kind(agent) is None


def test_the_same_tool_failing_three_times_in_a_row_is_a_stall(agent):
    item = focus(agent, minutes_ago=1)
    call(item, "web_fetch", True, 1)
    for turn in (2, 3, 4):
        call(item, "web_fetch", False, turn)
    stall = stalls_of([agent.id])[agent.id]
    assert (stall.kind, stall.reason) == ("tool_failing", "the tool web_fetch failed 3 times in a row")
    call(item, "memory_search", True, 5)  # it moved on
    assert kind(agent) is None


def test_failures_of_different_tools_are_not_the_same_tool_failing(agent):
    item = focus(agent, minutes_ago=1)
    for turn, name in enumerate(["web_fetch", "shell", "web_fetch"]):
        call(item, name, False, turn)
    assert kind(agent) is None


def test_a_persons_answer_awaited_past_a_day_is_a_stall(agent, alice):
    ask(agent, alice, hours_ago=3)
    assert kind(agent) is None
    ask(agent, alice, hours_ago=25)
    stall = stalls_of([agent.id])[agent.id]
    assert stall.kind == "waiting_on_person" and stall.reason == "waiting for alice's answer for 25 h"


def test_the_api_carries_the_stall_on_the_list_and_the_detail(agent, alice_client):
    assert alice_client.get(f"/api/agents/{agent.id}/").json()["stall"] is None
    focus(agent, minutes_ago=15)
    [row] = alice_client.get("/api/agents/").json()
    assert row["stall"]["kind"] == "long_focus" and row["stall"]["reason"].startswith("on the same system event")
    assert alice_client.get(f"/api/agents/{agent.id}/").json()["stall"] == row["stall"]


def many(alice, team, n: int, start: int) -> None:
    """``n`` agents, each stalled one of the three ways in turn."""
    for i in range(start, start + n):
        agent, _ = agent_create(name=f"Agent {i}", owner=alice, team=team, agent_id=f"s{i:02d}")
        if i % 3 == 0:
            focus(agent, minutes_ago=30)
        elif i % 3 == 1:
            item = focus(agent, minutes_ago=1)
            for turn in range(3):
                call(item, "shell", False, turn)
        else:
            ask(agent, alice, hours_ago=30)


def statements(read) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def test_the_agents_list_page_and_api_cost_the_same_statements_for_3_and_15_stalled_agents(alice, team, alice_client):
    browser = Client()
    browser.force_login(alice)

    def page():
        response = browser.get("/agents/")
        assert response.status_code == 200
        return response

    def api():
        response = alice_client.get("/api/agents/")
        assert response.status_code == 200
        return response

    many(alice, team, 3, 0)
    small = statements(page), statements(api)
    assert page().content.decode().count("⏳ Stuck:") == 3
    many(alice, team, 12, 3)
    assert page().content.decode().count("⏳ Stuck:") == 15
    assert sum(1 for r in api().json() if r["stall"]) == 15
    assert (statements(page), statements(api)) == small, small


def test_the_card_and_the_mind_view_say_why(agent, alice):
    browser = Client()
    browser.force_login(alice)
    focus(agent, minutes_ago=20)
    card = browser.get("/agents/").content.decode()
    assert 'data-stall="long_focus"' in card and "⏳ Stuck: on the same system event for 20 min" in card
    mind = browser.get(f"/agents/{agent.id}/mind/").content.decode()
    assert 'id="mind-stall"' in mind and "on the same system event for 20 min" in mind


def test_the_owner_is_told_once_per_stall(agent, alice):
    first = focus(agent, minutes_ago=20)
    assert len(notify_stalls()) == 1
    assert notify_stalls() == []  # the same stall: told already
    [note] = UserNotification.objects.filter(user=alice, type=NotificationType.AGENT_STALLED)
    assert note.metadata["agentId"] == agent.id and "on the same system event" in note.title
    MailboxItem.objects.filter(id=first.id).update(status=Status.COMPLETED)
    focus(agent, minutes_ago=12, summary="the next one")  # a new stall: a new start
    assert len(notify_stalls()) == 1
    assert UserNotification.objects.filter(user=alice, type=NotificationType.AGENT_STALLED).count() == 2


def test_a_paused_agent_is_not_notified(agent, alice):
    focus(agent, minutes_ago=20)
    type(agent).objects.filter(id=agent.id).update(status="paused")
    assert notify_stalls() == []


def test_the_beat_costs_the_same_statements_for_3_and_15_stalls_already_told(alice, team):
    many(alice, team, 3, 0)
    assert len(notify_stalls()) == 3
    small = statements(notify_stalls)
    many(alice, team, 12, 3)
    assert len(notify_stalls()) == 12
    assert statements(notify_stalls) == small
