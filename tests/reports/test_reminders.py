"""Reminders (issue 16, deliverable 6): ``schedule_reminder`` puts a deferred item in the
agent's own future; it fires once when due (however many sweeps look), is listed and
cancellable in the API and the mind view. Time is frozen (time-machine)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient

from attention import loop
from attention import services as attention
from attention.models import AgentActivity
from attention.toolbox import ToolContext, execute_tool, schemas_for
from mailbox.lifecycle import resurface_due
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.reports import reminders
from notifications.models import UserNotification

from .conftest import make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # 12:00 in Tokyo


def at(moment: datetime) -> time_machine.travel:
    return time_machine.travel(moment, tick=False)


def schedule(agent, when: str, text: str = "remind Alice about the review", item_id: str | None = None):
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, mailbox_item_id=item_id, scenario="chat")
    return execute_tool(ctx, "schedule_reminder", {"text": text, "when": when})


# ---------------------------------------------------------------------------- when


@pytest.mark.parametrize(
    ("when", "local"),
    [
        ("in 2h", "2026-12-01T14:00:00+09:00"),
        ("in 1d 4h", "2026-12-02T16:00:00+09:00"),
        ("in 90 minutes", "2026-12-01T13:30:00+09:00"),
        ("tomorrow at 9", "2026-12-02T09:00:00+09:00"),
        ("tomorrow", "2026-12-02T09:00:00+09:00"),
        ("Tomorrow 2:30pm", "2026-12-02T14:30:00+09:00"),
        ("today at 17:45", "2026-12-01T17:45:00+09:00"),
        ("at 9am", "2026-12-02T09:00:00+09:00"),  # 9 has passed today: the next one
        ("at 13:00", "2026-12-01T13:00:00+09:00"),
        ("2026-12-03T08:15", "2026-12-03T08:15:00+09:00"),  # naive: the agent's zone
        ("2026-12-03T08:15:00Z", "2026-12-03T17:15:00+09:00"),
        ("2026-12-03T08:15:00-05:00", "2026-12-03T22:15:00+09:00"),
        ("2026-12-24", "2026-12-24T09:00:00+09:00"),
    ],
)
def test_when_is_read_in_the_agents_time_zone(tokyo, when, local):
    with at(T0):
        ok, result = schedule(tokyo, when)
    assert ok, result
    [view] = [v for v in reminders.reminder_list(tokyo.id)]
    assert view.as_dict()["localTime"] == local


@pytest.mark.parametrize(
    ("when", "text", "message"),
    [
        ("2026-11-30T09:00", "x", "in the past (it is 2026-"),
        ("today at 8", "x", "in the past"),
        ("in 0 minutes", "x", "in the past"),
        ("in 366 days", "x", "more than a year"),
        ("2028-01-01T09:00", "x", "more than a year"),
        ("next blue moon", "x", "cannot read"),
        ("in 3 fortnights", "x", "unknown unit"),
        ("tomorrow at 25", "x", "not a time of day"),
        ("", "x", "when is empty"),
        ("in 1h", "   ", "text is empty"),
        ("in 1h", "y" * 2001, "at most 2000"),
    ],
)
def test_bad_input_is_a_tool_error_the_llm_can_read(tokyo, when, text, message):
    with at(T0):
        ok, result = schedule(tokyo, when, text)
    assert not ok and message in result
    assert not MailboxItem.objects.filter(source_type=MailboxType.REMINDER).exists()


def test_the_tool_is_offered_in_the_working_scenarios_and_not_while_writing_a_report():
    for scenario in ("chat", "task_execution", "comment_response", "a2a", "check_in", "reminder_due"):
        assert "schedule_reminder" in {s["function"]["name"] for s in schemas_for(scenario)}, scenario
    assert "schedule_reminder" not in {s["function"]["name"] for s in schemas_for("daily_report_writing")}


# ---------------------------------------------------------------------------- firing


def _sweep_and_run(agent) -> int:
    """One sweep, then what the woken worker does: a run of the agent's loop."""
    kicked = attention.sweep()
    loop.run_attention(agent.id)
    return kicked


def test_set_in_a_chat_it_fires_once_at_its_time_even_with_two_sweeps(tokyo, alice, offline):
    chat = mailbox_enqueue(
        agent_id=tokyo.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": "review", "content": "remind me about the review tomorrow at 9"},
        metadata={"senderRole": "user", "senderId": str(alice.pk), "senderName": "alice"},
    )
    brain = ScriptedProvider(
        [
            Turn(tool_calls=[("schedule_reminder", {"text": "Review of the Q4 plan is due", "when": "tomorrow at 9"})]),
            Turn(text="I will remind you tomorrow at 9."),
        ]
    )
    set_provider_override(brain)
    with at(T0):
        loop.run_attention(tokyo.id)
    chat.refresh_from_db()
    assert chat.status == Status.COMPLETED
    [item] = MailboxItem.objects.filter(agent=tokyo, source_type=MailboxType.REMINDER)
    due = datetime(2026, 12, 2, 0, 0, tzinfo=UTC)  # 09:00 in Tokyo
    assert item.status == Status.DEFERRED and item.deferred_until == due
    assert item.metadata["senderId"] == str(alice.pk)  # who it is for

    set_provider_override(None)
    from markus.llm.offline import OfflineProvider

    set_provider_override(OfflineProvider())
    with at(due - timedelta(minutes=1)):
        assert _sweep_and_run(tokyo) == 0  # not due yet: nothing to kick
        item.refresh_from_db()
        assert item.status == Status.DEFERRED
    with at(due + timedelta(minutes=1)):
        assert _sweep_and_run(tokyo) == 1
        assert _sweep_and_run(tokyo) == 0  # the second sweep finds nothing due
        assert resurface_due(tokyo.id) == 0
    item.refresh_from_db()
    assert item.status == Status.COMPLETED
    assert AgentActivity.objects.filter(mailbox_item=item).count() == 1
    # The offline brain passed the reminder on to the person it was set for: once.
    [told] = ChatMessage.objects.filter(session__agent=tokyo, metadata__notifyUser=True)
    assert "Review of the Q4 plan is due" in told.content and told.metadata["targetUserId"] == alice.pk
    assert UserNotification.objects.filter(user=alice, body__contains="Review of the Q4 plan").count() == 1
    assert reminders.reminder_state(item) == reminders.FIRED


def test_two_loops_resurfacing_at_once_fire_it_once(tokyo):
    with at(T0):
        schedule(tokyo, "in 10 minutes")
    with at(T0 + timedelta(minutes=11)):
        assert resurface_due(tokyo.id) + resurface_due(tokyo.id) == 1


# ---------------------------------------------------------------------------- list and cancel


@pytest.fixture
def bob_client(bob):
    client = APIClient()
    client.force_authenticate(bob)
    return client


def test_listing_and_cancelling_in_the_api(tokyo, alice, team, alice_client, bob_client, charlie_client):
    with at(T0):
        schedule(tokyo, "in 2h", "second")
        schedule(tokyo, "in 1h", "first")
        schedule(tokyo, "in 5 minutes", "fires")
    other = make_agent(alice, team, "otto", role="engineer")
    with at(T0):
        schedule(other, "in 1h", "not Kenji's")
    other_item = MailboxItem.objects.get(agent=other, source_type=MailboxType.REMINDER)
    with at(T0 + timedelta(minutes=6)):
        resurface_due(tokyo.id)
        listed = alice_client.get(f"/api/agents/{tokyo.id}/reminders").json()["reminders"]
        assert [(r["text"], r["state"]) for r in listed] == [
            ("first", "pending"),
            ("second", "pending"),
            ("fires", "fired"),
        ]
        assert listed[0]["localTime"] == "2026-12-01T13:00:00+09:00" and listed[0]["timezone"] == "Asia/Tokyo"
        first, fired = listed[0]["id"], listed[2]["id"]
        url = f"/api/agents/{tokyo.id}/reminders/"

        assert bob_client.get(f"/api/agents/{tokyo.id}/reminders").status_code == 200  # a teammate sees
        assert bob_client.delete(url + first).status_code == 403  # but does not control
        assert charlie_client.delete(url + first).status_code == 404  # an outsider sees nothing
        assert alice_client.delete(url + other_item.id).status_code == 404  # another agent's item
        assert alice_client.delete(url + "mbx_nope").status_code == 404

        answer = alice_client.delete(url + first)
        assert answer.status_code == 200 and answer.json() == {
            "id": first,
            "state": "cancelled",
            "mailboxStatus": "dropped",
        }
        again = alice_client.delete(url + first)
        assert again.status_code == 409 and again.json()["allowed"] == []
        gone = alice_client.delete(url + fired)
        assert gone.status_code == 409 and "fired" in gone.json()["detail"]
    # The cancelled one never fires.
    with at(T0 + timedelta(hours=3)):
        resurface_due(tokyo.id)
    assert MailboxItem.objects.get(id=first).status == Status.DROPPED
    states = {r["text"]: r["state"] for r in alice_client.get(f"/api/agents/{tokyo.id}/reminders").json()["reminders"]}
    assert states == {"first": "cancelled", "second": "fired", "fires": "fired"}


def test_the_mind_view_lists_pending_reminders_and_cancels_one(tokyo, alice, bob, client):
    with at(T0):
        schedule(tokyo, "in 1h", "call the vendor")
    item = MailboxItem.objects.get(agent=tokyo, source_type=MailboxType.REMINDER)
    client.force_login(alice)
    page = client.get(f"/agents/{tokyo.id}/mind/").content.decode()
    assert f'id="reminder-{item.id}"' in page and "call the vendor" in page
    cancel = f"/agents/{tokyo.id}/mind/reminders/{item.id}/cancel/"
    assert cancel in page and "csrfmiddlewaretoken" in page
    assert client.get(cancel).status_code == 405
    answer = client.post(cancel, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    html = answer.content.decode()
    assert "cancelled" in html and f'id="reminder-{item.id}"' not in html
    assert client.post(cancel, HTTP_HX_REQUEST="true").status_code == 409

    client.force_login(bob)  # a teammate watches: no cancel button, and a POST is refused
    with at(T0):
        schedule(tokyo, "in 2h", "second one")
    second = MailboxItem.objects.get(agent=tokyo, source_type=MailboxType.REMINDER, status=Status.DEFERRED)
    page = client.get(f"/agents/{tokyo.id}/mind/").content.decode()
    assert "second one" in page and "/cancel/" not in page
    assert client.post(f"/agents/{tokyo.id}/mind/reminders/{second.id}/cancel/").status_code == 403
