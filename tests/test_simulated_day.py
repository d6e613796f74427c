"""A simulated day end to end with the offline brain (issue 16): heartbeats from the
beat's task, a person's chats, observations saved with ``memory_save``, a reminder that
fires once, a dream that consolidates the observations into MEMORY.md, and the manager's
daily report at 20:00 in its time zone. Every periodic item goes through the mailbox and
shows in the timeline (``GET /api/agents/{id}/mailbox``). Time is frozen and moved by
hand; each beat is followed by a run of the agent's loop (what the woken worker does)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from attention import loop
from attention.tasks import daily_report_all, dream_cycle_all, heartbeat_all
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.base import set_provider_override
from markus.llm.offline import OfflineProvider
from markus.memory import selectors as memory
from markus.reports.models import DailyReport
from notifications.models import UserNotification

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]
ZONE = "Europe/Berlin"  # UTC+1 in December


def local(hour: int, minute: int = 0) -> time_machine.travel:
    """That time on 2026-12-01 in Berlin, frozen."""
    return time_machine.travel(datetime(2026, 12, 1, hour - 1, minute, tzinfo=UTC), tick=False)


@pytest.fixture
def mia(alice, team):
    agent, _ = agent_create(name="Mia", role="Engineering Manager", owner=alice, team=team, agent_id="mia")
    agent.timezone = ZONE
    agent.save(update_fields=["timezone"])
    set_provider_override(OfflineProvider())
    yield agent
    set_provider_override(None)


def tool(agent, name: str, args: dict, scenario: str = "chat") -> dict:
    import json

    ok, result = execute_tool(ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=scenario), name, args)
    assert ok, result
    return json.loads(result)


def chat(agent, alice, text: str) -> None:
    mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:80], "content": text},
        metadata={"senderRole": "user", "senderId": str(alice.pk), "senderName": "alice"},
    )
    loop.run_attention(agent.id)


LESSONS = [
    "Alice wants code reviews before noon",
    "The vendor contract renews on January 15",
    "Deploys on Fridays need a second reviewer",
]


def test_a_simulated_day(mia, alice, alice_client):
    with local(7):  # the morning: the first heartbeat (a fresh agent is due at once)
        assert heartbeat_all() == 1
        loop.run_attention(mia.id)
    with local(9):
        chat(mia, alice, "Good morning! Please remind me about the Q4 review.")
        tool(mia, "schedule_reminder", {"text": "Tell Alice the Q4 review starts in 30 minutes", "when": "in 2h"})
        # What the agent learnt during the morning, saved as it went (the same tool call
        # an LLM makes): 51 observations, the three lessons again and again.
        for i in range(51):
            tool(mia, "memory_save", {"content": LESSONS[i % 3] + ("." if i % 2 else ""), "kind": "lesson"})
    with local(11, 5):  # the reminder is due
        loop.run_attention(mia.id)
        loop.run_attention(mia.id)  # a second run finds nothing more to do
    with local(13, 5):  # six hours on: the second heartbeat
        assert heartbeat_all() == 1
        loop.run_attention(mia.id)
    before = memory.markdown(mia.id)
    with local(16):  # the dream check: 51 new observations
        assert dream_cycle_all() == 1
        loop.run_attention(mia.id)
    with local(19, 59):
        assert daily_report_all() == 0
    with local(20, 0):
        assert daily_report_all() == 1
        loop.run_attention(mia.id)

    # Every item of the day was handled, each once.
    items = MailboxItem.objects.filter(agent=mia)
    assert not items.exclude(status=Status.COMPLETED).exists(), list(items.values_list("source_type", "status"))
    by_type = {t: items.filter(source_type=t).count() for t in MailboxType}
    assert by_type[MailboxType.HEARTBEAT] == 2
    assert by_type[MailboxType.REMINDER] == 1
    assert by_type[MailboxType.MEMORY_CONSOLIDATION] == 1
    assert by_type[MailboxType.DAILY_REPORT] == 1

    # The timeline shows the heartbeats, the dream, the reminder and the report.
    history = alice_client.get(f"/api/agents/{mia.id}/mailbox?limit=100").json()["history"]
    kinds = [entry["sourceType"] for entry in history]
    for kind in (MailboxType.HEARTBEAT, MailboxType.MEMORY_CONSOLIDATION, MailboxType.REMINDER):
        assert kind.value in kinds
    assert kinds[0] == MailboxType.DAILY_REPORT.value  # the day's last item

    # The reminder reached Alice once.
    told = UserNotification.objects.filter(user=alice, body__contains="Q4 review starts").exclude(type="agent_report")
    assert [n.title for n in told] == ["Reminder"]

    # The dream promoted the recurring lessons into MEMORY.md.
    after = memory.markdown(mia.id)
    assert after != before
    assert "Alice wants code reviews before noon" in after

    # memory_search finds what was saved.
    found = tool(mia, "memory_search", {"query": "vendor contract"})["observations"]
    assert found and "vendor contract renews" in found[0]["content"].lower()

    # The daily report: written from the day's activities, stored, sent to Alice.
    report = DailyReport.objects.get(agent=mia)
    assert report.date.isoformat() == "2026-12-01"
    assert "Reminder: Tell Alice the Q4 review" in report.content
    assert report.activity["total"] >= 5
    assert UserNotification.objects.filter(user=alice, type="agent_report").count() == 1
    assert alice_client.get(f"/api/agents/{mia.id}/reports/2026-12-01").json()["content"] == report.content
