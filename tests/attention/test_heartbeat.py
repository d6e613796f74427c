"""The heartbeat per agent (issue 16, item 2), with frozen time: its interval (default,
clamped, the agent's own), active hours in the agent's time zone, at most one open per
agent, the skips (a person waiting, nothing changed) through the real loop with the
offline brain, deep sleep and waking, and the tool the agent sets its rhythm with."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from attention import heartbeat, loop, tasks
from attention.heartbeat import HUMAN_WAITING, NOTHING_CHANGED
from attention.models import ActivityLogType, AgentActivity, AgentActivityLog
from attention.scenarios import CHAT, CHECK_IN
from attention.toolbox import ToolContext, execute_tool, schemas_for
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent, ChatMessage
from markus.agents.services import agent_create
from markus.console.services import console_heartbeat
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # a Tuesday
H = timedelta(hours=1)


@pytest.fixture
def clock():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


def fresh(agent: Agent) -> Agent:
    return Agent.objects.get(id=agent.id)


def heartbeats(agent_id: str, **filters) -> list[MailboxItem]:
    return list(MailboxItem.objects.filter(agent_id=agent_id, source_type=T.HEARTBEAT, **filters).order_by("queued_at"))


def tick_at(clock, when: datetime) -> int:
    clock.move_to(when)
    return tasks.heartbeat_all()


def main_session_lines(agent_id: str) -> list[str]:
    return list(
        ChatMessage.objects.filter(session__agent_id=agent_id, session__is_main=True)
        .order_by("created_at", "id")
        .values_list("content", flat=True)
    )


def llm_turns(item: MailboxItem) -> int:
    return AgentActivityLog.objects.filter(activity__mailbox_item=item, type=ActivityLogType.LLM_REQUEST).count()


def chat(agent_id: str, text: str = "Hello there") -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderRole": "user", "senderId": "alice"},
    )


# ---------------------------------------------------------------------------- intervals


def test_a_fresh_agent_is_due_at_the_first_tick_then_every_six_hours(clock, agent):
    assert tick_at(clock, T0) == 1
    [first] = heartbeats(agent.id)
    assert first.extra["period"] == f"{agent.id}:2026-12-01T09:00:00Z" and first.extra["intervalMinutes"] == 360
    assert fresh(agent).next_heartbeat_at == T0 + 6 * H
    MailboxItem.objects.filter(id=first.id).update(status=Status.COMPLETED)

    assert tick_at(clock, T0 + 6 * H - timedelta(minutes=5)) == 0
    assert tick_at(clock, T0 + 6 * H) == 1
    assert tick_at(clock, T0 + 6 * H + timedelta(minutes=5)) == 0
    assert len(heartbeats(agent.id)) == 2
    assert fresh(agent).next_heartbeat_at == T0 + 12 * H


def test_each_agent_keeps_its_own_interval(clock, agent, alice):
    quick, _ = agent_create(name="Quick", owner=alice, agent_id="quick")
    heartbeat.rhythm_update(quick.id, interval_minutes=30)
    Agent.objects.filter(id=quick.id).update(next_heartbeat_at=None)
    assert tick_at(clock, T0) == 2
    MailboxItem.objects.filter(source_type=T.HEARTBEAT).update(status=Status.COMPLETED)
    assert tick_at(clock, T0 + timedelta(minutes=30)) == 1
    assert [i.agent_id for i in heartbeats(quick.id)] == ["quick", "quick"]
    assert len(heartbeats(agent.id)) == 1


@pytest.mark.parametrize(
    "own,expected",
    [(None, 360), (5, 5), (1440, 1440), (1, 5), (0, 360), (3000, 1440)],
)
def test_the_interval_is_clamped_to_five_minutes_and_a_day(agent, own, expected):
    """Whatever is stored (a value written around the checks included) counts within
    5 min – 24 h; none (or 0): the default."""
    Agent.objects.filter(id=agent.id).update(heartbeat_interval_minutes=own)
    assert heartbeat.base_minutes(fresh(agent)) == expected


def test_the_default_comes_from_the_settings_and_is_clamped_too(agent, settings):
    settings.MARKUS = {**settings.MARKUS, "HEARTBEAT_DEFAULT_MINUTES": 90}
    assert heartbeat.base_minutes(fresh(agent)) == 90
    settings.MARKUS = {**settings.MARKUS, "HEARTBEAT_DEFAULT_MINUTES": 2}
    assert heartbeat.base_minutes(fresh(agent)) == 5


# ---------------------------------------------------------------------------- active hours


def test_outside_its_active_hours_an_agent_gets_no_heartbeat_until_they_begin(clock, agent, alice):
    """09:00–17:00 in each agent's own time zone. At 23:00 UTC it is 08:00 in Tokyo and
    18:00 in New York: neither is due; Tokyo's day begins at 00:00 UTC, New York's at
    14:00 UTC the next day."""
    tokyo, _ = agent_create(name="Kenji", owner=alice, agent_id="tokyo")
    york, _ = agent_create(name="Nora", owner=alice, agent_id="york")
    for a, zone in ((tokyo, "Asia/Tokyo"), (york, "America/New_York")):
        heartbeat.rhythm_update(a.id, time_zone=zone, active_start=9, active_end=17)
    Agent.objects.filter(id__in=[tokyo.id, york.id]).update(next_heartbeat_at=None)
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.PAUSED)  # (not part of this)

    evening = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    assert tick_at(clock, evening) == 0
    assert fresh(tokyo).next_heartbeat_at == datetime(2026, 12, 2, 0, 0, tzinfo=UTC)
    assert fresh(york).next_heartbeat_at == datetime(2026, 12, 2, 14, 0, tzinfo=UTC)

    assert tick_at(clock, datetime(2026, 12, 2, 0, 0, tzinfo=UTC)) == 1
    assert [i.agent_id for i in MailboxItem.objects.filter(source_type=T.HEARTBEAT)] == ["tokyo"]
    assert tick_at(clock, datetime(2026, 12, 2, 13, 55, tzinfo=UTC)) == 0
    assert tick_at(clock, datetime(2026, 12, 2, 14, 0, tzinfo=UTC)) == 1
    assert heartbeats(york.id)[0].queued_at == datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "local_hour,active",
    [(21, False), (22, True), (23, True), (0, True), (5, True), (6, False), (12, False)],
)
def test_active_hours_may_run_past_midnight(agent, local_hour, active):
    heartbeat.rhythm_update(agent.id, time_zone="Europe/Berlin", active_start=22, active_end=6)
    # Berlin is UTC+1 in December.
    at = datetime(2026, 12, 1, local_hour, 30, tzinfo=UTC) - H
    assert heartbeat.in_active_hours(fresh(agent), at) is active


def test_active_hours_follow_daylight_saving_time(agent):
    heartbeat.rhythm_update(agent.id, time_zone="Europe/Berlin", active_start=9, active_end=17)
    summer = datetime(2026, 7, 1, 7, 30, tzinfo=UTC)  # 09:30 in Berlin (UTC+2)
    winter = datetime(2026, 12, 1, 7, 30, tzinfo=UTC)  # 08:30 in Berlin (UTC+1)
    assert heartbeat.in_active_hours(fresh(agent), summer)
    assert not heartbeat.in_active_hours(fresh(agent), winter)
    assert heartbeat.window_opens(fresh(agent), winter) == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


# ---------------------------------------------------------------------------- at most one


def test_at_most_one_heartbeat_is_open_per_agent(clock, agent, alice):
    """A heartbeat still queued (here one an operator asked for), processing or
    deferred: the period passes without a second one, and the next is due an interval
    later."""
    console_heartbeat(agent=agent, operator=alice)
    assert tick_at(clock, T0) == 0
    assert len(heartbeats(agent.id)) == 1
    assert fresh(agent).next_heartbeat_at == T0 + 6 * H
    for status in (Status.PROCESSING, Status.DEFERRED):
        MailboxItem.objects.filter(source_type=T.HEARTBEAT).update(status=status)
        Agent.objects.filter(id=agent.id).update(next_heartbeat_at=None)
        assert tick_at(clock, T0) == 0
    assert len(heartbeats(agent.id)) == 1


def test_ticks_twice_in_a_period_enqueue_once(clock, agent):
    assert tick_at(clock, T0) == 1
    MailboxItem.objects.filter(source_type=T.HEARTBEAT).update(status=Status.COMPLETED)
    assert tick_at(clock, T0) == 0
    assert tick_at(clock, T0 + timedelta(seconds=1)) == 0
    assert len(heartbeats(agent.id)) == 1


def test_paused_and_external_agents_get_none(clock, agent, alice):
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.PAUSED)
    agent_create(name="Cli", owner=alice, agent_id="cli", kind=Agent.Kind.EXTERNAL)
    assert tick_at(clock, T0) == 0
    assert not MailboxItem.objects.filter(source_type=T.HEARTBEAT).exists()


# ---------------------------------------------------------------------------- skips (the real loop)


def run(agent: Agent) -> None:
    assert loop.run_attention(agent.id).status == "done"


def test_a_heartbeat_with_nothing_new_since_the_last_skips_the_llm(clock, agent):
    tick_at(clock, T0)
    run(agent)
    [first] = heartbeats(agent.id)
    assert first.status == Status.COMPLETED and llm_turns(first) >= 1  # the first one looks around
    assert fresh(agent).last_heartbeat_at == T0

    tick_at(clock, T0 + 6 * H)
    run(agent)
    second = heartbeats(agent.id)[1]
    assert second.status == Status.COMPLETED
    assert llm_turns(second) == 0
    activity = AgentActivity.objects.get(mailbox_item=second)
    assert activity.label.endswith(f"skipped: {NOTHING_CHANGED}") and activity.ended_at is not None
    assert AgentActivityLog.objects.filter(activity=activity, content=f"skipped: {NOTHING_CHANGED}").exists()
    assert main_session_lines(agent.id)[-1].endswith(f"→ skipped: {NOTHING_CHANGED}")
    a = fresh(agent)
    assert (a.last_heartbeat_at, a.heartbeat_idle_streak, a.heartbeat_sleep_depth) == (T0 + 6 * H, 1, 0)


def test_a_heartbeat_an_operator_asks_for_runs_even_with_nothing_new(clock, agent, alice):
    """ "Run a heartbeat now" in the console: the operator wants to see it think."""
    tick_at(clock, T0)
    run(agent)
    clock.move_to(T0 + H)
    item = console_heartbeat(agent=agent, operator=alice)
    run(agent)
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED and llm_turns(item) >= 1
    assert fresh(agent).last_heartbeat_at == T0 + H


def test_a_heartbeat_after_new_work_runs_the_llm(clock, agent):
    tick_at(clock, T0)
    run(agent)
    clock.move_to(T0 + 2 * H)
    chat(agent.id, "Can you look at the release notes?")
    run(agent)
    tick_at(clock, T0 + 6 * H)
    run(agent)
    second = heartbeats(agent.id)[1]
    assert second.status == Status.COMPLETED and llm_turns(second) >= 1
    assert main_session_lines(agent.id)[-1].endswith("→ heartbeat processed")
    assert fresh(agent).heartbeat_idle_streak == 0


def test_a_heartbeat_skips_while_a_persons_chat_waits(clock, agent, monkeypatch):
    """A chat arrives just as the heartbeat begins: the heartbeat steps aside without an
    LLM call (not counted as idle), and the chat is answered next in the same run."""
    tick_at(clock, T0)
    real = heartbeat.quiet_heartbeat
    arrived = []

    def chat_arrives_first(focus):
        if focus.item.source_type == T.HEARTBEAT and not arrived:
            arrived.append(chat(agent.id, "Are you there?"))
        return real(focus)

    monkeypatch.setattr(heartbeat, "quiet_heartbeat", chat_arrives_first)
    run(agent)
    [beat] = heartbeats(agent.id)
    assert beat.status == Status.COMPLETED and llm_turns(beat) == 0
    assert AgentActivity.objects.get(mailbox_item=beat).label.endswith(f"skipped: {HUMAN_WAITING}")
    assert MailboxItem.objects.get(id=arrived[0].id).status == Status.COMPLETED
    a = fresh(agent)
    assert (a.last_heartbeat_at, a.heartbeat_idle_streak) == (None, 0)  # busy is not idle


def test_a_preempted_heartbeat_resumes_without_a_second_check(clock, agent):
    """Resuming its saved session (or a retry) runs on: the check is made once."""
    tick_at(clock, T0)
    [beat] = heartbeats(agent.id)
    MailboxItem.objects.filter(id=beat.id).update(marks={"markerRetries": 1})
    Agent.objects.filter(id=agent.id).update(last_heartbeat_at=T0 - H)  # nothing changed since
    run(agent)
    assert llm_turns(MailboxItem.objects.get(id=beat.id)) >= 1


# ---------------------------------------------------------------------------- deep sleep


def test_three_idle_heartbeats_deepen_the_sleep_up_to_a_day_and_new_work_wakes_it(clock, agent):
    tick_at(clock, T0)
    run(agent)  # the first looks around: awake
    expected = [
        # (due at, idle streak after, depth after, next heartbeat after)
        (T0 + 6 * H, 1, 0, T0 + 12 * H),
        (T0 + 12 * H, 2, 0, T0 + 18 * H),
        (T0 + 18 * H, 3, 1, T0 + 30 * H),  # the third idle one: 12 h
        (T0 + 30 * H, 4, 2, T0 + 54 * H),  # 24 h, the most
        (T0 + 54 * H, 5, 2, T0 + 78 * H),
    ]
    for due, streak, depth, next_at in expected:
        assert tick_at(clock, due - timedelta(minutes=5)) == 0
        assert tick_at(clock, due) == 1
        run(agent)
        a = fresh(agent)
        assert (a.heartbeat_idle_streak, a.heartbeat_sleep_depth, a.next_heartbeat_at) == (streak, depth, next_at)
    assert heartbeat.effective_minutes(fresh(agent)) == 24 * 60
    assert all(llm_turns(b) == 0 for b in heartbeats(agent.id)[1:])

    # New work: a person writes. The next tick wakes the agent to its normal rhythm.
    clock.move_to(T0 + 60 * H)
    chat(agent.id, "Back to work: the release is tomorrow")
    run(agent)
    assert tick_at(clock, T0 + 60 * H + timedelta(minutes=5)) == 0
    a = fresh(agent)
    assert (a.heartbeat_sleep_depth, a.heartbeat_idle_streak) == (0, 0)
    assert a.next_heartbeat_at == T0 + 66 * H + timedelta(minutes=5)
    assert tick_at(clock, T0 + 66 * H + timedelta(minutes=5)) == 1
    run(agent)
    assert llm_turns(heartbeats(agent.id)[-1]) >= 1  # something changed: it looks around


def test_its_own_periodic_items_do_not_wake_a_sleeping_agent(clock, agent):
    Agent.objects.filter(id=agent.id).update(
        heartbeat_sleep_depth=2, heartbeat_idle_streak=5, last_heartbeat_at=T0, next_heartbeat_at=T0 + 24 * H
    )
    clock.move_to(T0 + H)
    mailbox_enqueue(agent_id=agent.id, source_type=T.MEMORY_CONSOLIDATION, payload={"summary": "dream"})
    assert heartbeat.wake_sleepers(T0 + 2 * H) == []
    mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "deploy finished"})
    assert heartbeat.wake_sleepers(T0 + 2 * H) == [agent.id]


def test_the_mind_view_shows_the_next_heartbeat_and_the_sleep_depth(clock, agent, alice, client):
    Agent.objects.filter(id=agent.id).update(
        heartbeat_sleep_depth=1, heartbeat_idle_streak=3, next_heartbeat_at=T0 + 12 * H, last_heartbeat_at=T0
    )
    client.force_login(alice)
    html = client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert 'datetime="2026-12-01T21:00:00+00:00"' in html and "Next heartbeat" in html
    assert 'data-sleep-depth="1"' in html
    assert "sleeping deeper: depth 1 (normally every 6 h)" in html and "every 12 h" in html


# ---------------------------------------------------------------------------- the agent's own tool


def test_set_heartbeat_interval_is_offered_in_the_check_in_and_in_chat():
    for scenario in (CHECK_IN, CHAT):
        assert "set_heartbeat_interval" in {s["function"]["name"] for s in schemas_for(scenario)}
    assert "set_heartbeat_interval" not in {s["function"]["name"] for s in schemas_for("task_execution")}


def test_the_agent_sets_its_own_interval_in_a_check_in(clock, agent):
    """Through the real loop: the LLM calls the tool during its heartbeat; the next
    heartbeat comes 30 minutes after this one."""
    Agent.objects.filter(id=agent.id).update(heartbeat_sleep_depth=1, heartbeat_idle_streak=4)
    tick_at(clock, T0)
    provider = ScriptedProvider(
        [
            Turn(tool_calls=[("set_heartbeat_interval", {"minutes": 30, "reason": "release day"})]),
            Turn(text="Watching the release closely."),
        ]
    )
    set_provider_override(provider)
    try:
        run(agent)
    finally:
        set_provider_override(None)
    a = fresh(agent)
    assert (a.heartbeat_interval_minutes, a.heartbeat_sleep_depth, a.heartbeat_idle_streak) == (30, 0, 0)
    assert a.next_heartbeat_at == T0 + timedelta(minutes=30)
    assert tick_at(clock, T0 + timedelta(minutes=30)) == 1


@pytest.mark.parametrize(
    "minutes,stored,clamped",
    [(2, 5, True), (5000, 1440, True), (45, 45, False)],
)
def test_the_tool_clamps_what_is_out_of_range(agent, minutes, stored, clamped):
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=CHECK_IN)
    ok, result = execute_tool(ctx, "set_heartbeat_interval", {"minutes": minutes})
    assert ok and json.loads(result)["intervalMinutes"] == stored
    assert ("clamped" in json.loads(result)) is clamped
    assert fresh(agent).heartbeat_interval_minutes == stored


@pytest.mark.parametrize("minutes", ["60", True, None])
def test_the_tool_refuses_what_is_not_a_whole_number_of_minutes(agent, minutes):
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=CHAT)
    ok, result = execute_tool(ctx, "set_heartbeat_interval", {"minutes": minutes})
    assert not ok and "must be a" in json.loads(result)["error"]
    assert fresh(agent).heartbeat_interval_minutes is None


def test_the_sweep_wakes_a_sleeper_as_soon_as_work_arrives(clock, agent, monkeypatch):
    """Waking does not wait for the heartbeat tick (every 5 min): the sweep (every
    MARKUS_SWEEP_SECONDS) brings a deep sleeper with new work back to its normal rhythm."""
    from attention import services

    monkeypatch.setattr(services, "wake", lambda agent_id, **kw: None)
    Agent.objects.filter(id=agent.id).update(
        heartbeat_sleep_depth=2, heartbeat_idle_streak=5, last_heartbeat_at=T0, next_heartbeat_at=T0 + 24 * H
    )
    clock.move_to(T0 + H)
    services.sweep()
    assert fresh(agent).heartbeat_sleep_depth == 2  # nothing new: it sleeps on
    chat(agent.id, "Are you there?")
    services.sweep()
    a = fresh(agent)
    assert (a.heartbeat_sleep_depth, a.heartbeat_idle_streak) == (0, 0)
    assert a.next_heartbeat_at == T0 + 7 * H  # its normal 6 h from now
