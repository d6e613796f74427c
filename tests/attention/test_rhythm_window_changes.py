"""The rhythm's active-hours window, in frozen time:

- an agent waiting outside its active hours for the window to open gets its normal
  rhythm back at once when the operator widens or clears the window or moves it to
  another time zone (not only the next morning);
- across a daylight-saving change the window still opens on the right hour;
- a change of rhythm is sent to the agent's watchers (``agent:rhythm``), so the mind
  view's header shows the new interval and sleep depth without a reload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from attention import heartbeat, tasks
from attention.scenarios import CHECK_IN
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from markus.agents.models import Agent

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

EVENING = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # 18:00 in Berlin (UTC+1)
NEXT_MORNING = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)  # 09:00 in Berlin
H = timedelta(hours=1)


def fresh(agent: Agent) -> Agent:
    return Agent.objects.get(id=agent.id)


def heartbeats(agent: Agent) -> list[MailboxItem]:
    return list(MailboxItem.objects.filter(agent_id=agent.id, source_type=T.HEARTBEAT))


@pytest.fixture
def office_hours(agent, alice_client):
    """Ada works 09:00-17:00 in Berlin; at 18:00 her next heartbeat waits for 09:00."""
    heartbeat.rhythm_update(agent.id, time_zone="Europe/Berlin", active_start=9, active_end=17)
    Agent.objects.filter(id=agent.id).update(last_heartbeat_at=EVENING - 5 * H, next_heartbeat_at=EVENING)
    with time_machine.travel(EVENING, tick=False) as clock:
        assert tasks.heartbeat_all() == 0
        assert fresh(agent).next_heartbeat_at == NEXT_MORNING
        yield clock


@pytest.mark.parametrize(
    "patch",
    [
        {"activeHours": None},
        {"activeHours": {"start": 8, "end": 22}},
        {"timezone": "America/New_York"},  # 12:00 there: inside 09:00-17:00
    ],
)
def test_an_operator_opening_the_window_gives_the_rhythm_back_at_once(office_hours, agent, alice_client, patch):
    response = alice_client.patch(f"/api/agents/{agent.id}/", patch, format="json")
    assert response.status_code == 200, response.content
    # The last heartbeat was at 12:00 UTC; every 6 h: the next is due at 18:00 UTC.
    assert fresh(agent).next_heartbeat_at == EVENING - 5 * H + 6 * H
    assert response.json()["nextHeartbeatAt"].startswith("2026-12-01T18:00:00")
    office_hours.move_to(EVENING + H)
    assert tasks.heartbeat_all() == 1
    assert [h.status for h in heartbeats(agent)] == [Status.QUEUED]


def test_narrowing_the_window_still_waits_for_it(office_hours, agent, alice_client):
    response = alice_client.patch(f"/api/agents/{agent.id}/", {"activeHours": {"start": 10, "end": 16}}, format="json")
    assert response.status_code == 200
    office_hours.move_to(NEXT_MORNING)  # 09:00: not yet
    assert tasks.heartbeat_all() == 0
    office_hours.move_to(NEXT_MORNING + H)  # 10:00 in Berlin
    assert tasks.heartbeat_all() == 1


@pytest.mark.parametrize(
    ("zone", "hours", "at", "opens"),
    [
        # Berlin springs forward at 02:00 on 29 March: 02:00 is 03:00 CEST, 01:00 UTC.
        ("Europe/Berlin", (2, 4), datetime(2026, 3, 29, 0, 30, tzinfo=UTC), datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
        # It falls back on 25 October: 02:30 comes twice; the window 03-02 opens at 03:00 CET.
        ("Europe/Berlin", (3, 2), datetime(2026, 10, 25, 1, 30, tzinfo=UTC), datetime(2026, 10, 25, 2, 0, tzinfo=UTC)),
        # New York, the day after it sprang forward: 09:00 EDT is 13:00 UTC.
        ("America/New_York", (9, 17), datetime(2026, 3, 9, 3, 0, tzinfo=UTC), datetime(2026, 3, 9, 13, 0, tzinfo=UTC)),
    ],
)
def test_the_window_opens_on_its_hour_across_daylight_saving_changes(agent, zone, hours, at, opens):
    heartbeat.rhythm_update(agent.id, time_zone=zone, active_start=hours[0], active_end=hours[1])
    a = fresh(agent)
    assert not heartbeat.in_active_hours(a, at)
    assert heartbeat.window_opens(a, at) == opens
    assert heartbeat.in_active_hours(a, opens)


def test_a_change_of_rhythm_tells_the_mind_view(agent, alice_client, sent_events, django_capture_on_commit_callbacks):
    """``agent:rhythm`` to the agent's group (markus.web.live redraws the header): a
    PATCH, the agent's own tool, and waking from deep sleep."""
    expected = ("agent.ada", {"type": "agent:rhythm", "agentId": "ada"})
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.patch(f"/api/agents/{agent.id}/", {"heartbeatIntervalMinutes": 150}, format="json")
    assert response.status_code == 200 and sent_events == [expected]

    sent_events.clear()
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=CHECK_IN)
    with django_capture_on_commit_callbacks(execute=True):
        assert execute_tool(ctx, "set_heartbeat_interval", {"minutes": 60})[0]
    assert sent_events == [expected]

    sent_events.clear()
    Agent.objects.filter(id=agent.id).update(
        heartbeat_sleep_depth=2, last_heartbeat_at=EVENING - 5 * H, next_heartbeat_at=EVENING + 24 * H
    )
    with django_capture_on_commit_callbacks(execute=True):
        MailboxItem.objects.create(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "deploy"}, queued_at=EVENING - H
        )
        assert heartbeat.wake_sleepers(EVENING) == [agent.id]
    assert sent_events == [expected]
