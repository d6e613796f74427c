"""Review of issue 16 (the agents' rhythm and memory): each test proves one defect and
fails until it is fixed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_recover
from markus.agents.services import agent_create
from markus.memory import search, services
from markus.reports.services import enqueue_due_reports
from tests.conftest import client_for


def _at(*args: int) -> time_machine.travel:
    return time_machine.travel(datetime(*args, tzinfo=UTC), tick=False)


@pytest.fixture
def kenji(alice, team):
    """A manager agent in Tokyo (owes a daily report from 20:00 local = 11:00 UTC)."""
    a, _ = agent_create(name="Kenji", role="Engineering Manager", owner=alice, team=team, agent_id="kenji")
    a.timezone = "Asia/Tokyo"
    a.save(update_fields=["timezone"])
    return a


# ---------------------------------------------------------------------------- MEMORY.md


@pytest.mark.django_db
def test_memory_document_read_from_the_api_can_be_put_back_unchanged(agent, alice):
    """GET /memory then PUT of the very markdown it returned answers 400 when a section's
    text holds a '## ' line (written by memory_update_longterm or a dream's promote)."""
    services.section_write(agent_id=agent.id, title="Deploys", content="Fridays only\n## Rollback\nuse the script")
    services.section_write(agent_id=agent.id, title="Rollback", content="ask ops first")
    client = client_for(alice)
    before = client.get(f"/api/agents/{agent.id}/memory").json()

    answer = client.put(f"/api/agents/{agent.id}/memory", {"markdown": before["markdown"]}, format="json")

    assert answer.status_code == 200, answer.json()
    assert [(s["title"], s["content"]) for s in answer.json()["sections"]] == [
        (s["title"], s["content"]) for s in before["sections"]
    ]


# ---------------------------------------------------------------------------- search


@pytest.mark.django_db
@pytest.mark.pg
def test_memory_search_finds_a_word_with_sharp_s_by_that_same_word(agent):
    """memory_search('Hauptstraße') finds nothing though an observation holds that word:
    search.terms casefolds the query ('ß' -> 'ss') while neither FTS5 nor to_tsvector
    folds the stored text, on both databases."""
    [saved] = [services.memory_save(agent_id=agent.id, content="The office moved to Hauptstraße 5").id]
    services.section_write(agent_id=agent.id, title="Straße", content="the address of the office")

    assert [h.id for h in search.search_observations(agent.id, "Hauptstraße")] == [saved]
    assert len(search.search_sections(agent.id, "Straße")) == 1


# ---------------------------------------------------------------------------- daily report


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_a_daily_report_lost_in_a_worker_crash_is_asked_for_again_that_day(kenji):
    """A daily_report item in flight when its worker died is dropped by recovery, and no
    report is ever asked for that day again (the dream cycle does not count such a drop,
    the daily report does): the owner never gets the day's report."""
    with _at(2026, 12, 1, 11, 0):  # 20:00 in Tokyo
        assert enqueue_due_reports() == 1
    [item] = MailboxItem.objects.filter(agent=kenji, source_type=MailboxType.DAILY_REPORT)
    MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING)  # its worker dies in it
    report = mailbox_recover(kenji.id)
    assert report.dropped == [item.id]

    with _at(2026, 12, 1, 11, 15):  # 20:15 in Tokyo, the next check
        assert enqueue_due_reports() == 1


# ---------------------------------------------------------------------------- reminders


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_a_reminder_in_flight_at_a_worker_crash_is_not_lost(agent):
    """A reminder that came due and was in flight when its worker stopped is dropped by
    restart recovery (only chats, human comments, execution triggers and reviews are
    re-queued): the reminder a person asked for is silently never acted on."""
    from markus.reports.reminders import reminder_schedule

    with _at(2026, 12, 1, 8, 0):
        item = reminder_schedule(agent=agent, text="remind alice about the review", when="in 1h")
    with _at(2026, 12, 1, 9, 1):  # due: the sweep brought it back and a worker began it
        MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING, deferred_until=None)
        mailbox_recover(agent.id)
    item.refresh_from_db()
    assert item.status in (Status.QUEUED, Status.DEFERRED), (item.status, item.drop_reason)


@pytest.mark.django_db
def test_the_reminders_of_an_agent_can_all_be_listed(agent, alice):
    """GET /api/agents/{id}/reminders stops at 100 with no totalCount and no limit/offset
    (reports have both): reminders beyond the 100th can never be seen or cancelled by id."""
    from markus.reports.reminders import reminder_schedule

    with _at(2026, 12, 1, 8, 0):
        made = {reminder_schedule(agent=agent, text=f"follow up #{n}", when=f"in {n + 1}h").id for n in range(105)}
    client = client_for(alice)
    seen: set[str] = set()
    for _ in range(10):  # pages, as the API offers them
        page = client.get(f"/api/agents/{agent.id}/reminders", {"limit": 50, "offset": len(seen)}).json()
        new = {r["id"] for r in page["reminders"]} - seen
        if not new:
            break
        seen |= new
    assert seen == made


# ---------------------------------------------------------------------------- the offline brain in a chat


@pytest.mark.django_db
def test_the_offline_brain_answers_a_chat_asking_for_an_absurd_check_in_interval(agent):
    """'check in every <5000 digits> hours' crashes the offline brain's chat plan
    (int() of a number past Python's 4300-digit limit): the chat fails three times and
    the person never gets an answer, where the tool would simply clamp."""
    from attention import loop
    from attention.models import AgentActivity
    from mailbox.services import mailbox_enqueue
    from markus.llm.base import set_provider_override
    from markus.llm.offline import OfflineProvider

    text = "Please check in every " + "9" * 5000 + " hours"
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:60], "content": text},
        metadata={"senderRole": "user", "senderId": "alice"},
    )
    set_provider_override(OfflineProvider())
    try:
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    outcomes = list(AgentActivity.objects.filter(mailbox_item_id=item.id).values_list("success", flat=True))
    assert outcomes == [True]


# ---------------------------------------------------------------------------- dream cycle


@pytest.mark.django_db
def test_a_dream_preempted_by_a_chat_still_holds_its_place_under_the_cap(alice):
    """A dream preempted by a person's chat is deferred for resumption (seconds) and no
    longer counted by dream.dreaming_now (queued/processing only): a check in that window
    starts a 4th dream, and once the preempted one resumes 4 agents dream at once."""
    from datetime import timedelta

    from django.utils import timezone

    from mailbox import lifecycle
    from markus.memory.dream import dream_check
    from markus.memory.models import Observation

    crew = [agent_create(name=f"D{i}", owner=alice, agent_id=f"d{i}")[0] for i in range(4)]
    for i, a in enumerate(crew):
        Observation.objects.bulk_create(Observation(agent_id=a.id, content=f"note {n}") for n in range(50 + i))
    assert dream_check() == 3  # d1, d2, d3
    dream = MailboxItem.objects.get(agent_id="d3", source_type=MailboxType.MEMORY_CONSOLIDATION)
    MailboxItem.objects.filter(id=dream.id).update(status=Status.PROCESSING)
    # A chat preempts it: settle defers it for resumption a few seconds later.
    assert lifecycle.defer(dream.id, until=timezone.now() + timedelta(seconds=5), from_statuses=[Status.PROCESSING])

    assert dream_check() == 0


# ---------------------------------------------------------------------------- beat schedules


@pytest.mark.django_db
@pytest.mark.pg
def test_an_operator_who_sets_the_heartbeat_tick_to_30_minutes_keeps_it_after_a_restart():
    """An operator who today sets the heartbeat entry to every 30 minutes (or the dream
    cycle to 03:00) in the console loses it at the next start: ensure_beat_schedule takes
    any row on an earlier release's schedule for an untouched old row and 'upgrades' it."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    from attention.services import sync_beat_schedule

    sync_beat_schedule()
    heartbeat = PeriodicTask.objects.get(name="attention.heartbeat")
    heartbeat.interval, _ = IntervalSchedule.objects.get_or_create(every=30, period="minutes")
    heartbeat.save()  # the operator's change in the console (Periodic tasks)
    dream = PeriodicTask.objects.get(name="attention.dream_cycle")
    dream.interval, (dream.crontab, _) = None, CrontabSchedule.objects.get_or_create(minute="0", hour="3")
    dream.save()

    sync_beat_schedule()  # manage.py up after a restart

    heartbeat.refresh_from_db()
    dream.refresh_from_db()
    assert (heartbeat.interval.every, heartbeat.interval.period) == (30, "minutes")
    assert dream.interval is None and (dream.crontab.minute, dream.crontab.hour) == ("0", "3")


@pytest.mark.django_db
def test_memory_document_with_windows_line_endings_is_measured_as_the_document(agent, alice):
    """PUT /memory refuses with 413 a MEMORY.md that is within 15,000 characters once
    parsed, only because it came with CRLF line endings (a Windows editor):
    services.document_replace checks the raw text's length before normalising it."""
    section = "\n".join(["x" * 48] * 60)  # 2,939 characters
    markdown = "\n\n".join(f"## Part {i}\n\n{section}" for i in range(5)) + "\n"
    windows = markdown.replace("\n", "\r\n")
    assert len(markdown) <= 15000 < len(windows)

    answer = client_for(alice).put(f"/api/agents/{agent.id}/memory", {"markdown": windows}, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["markdown"] == markdown
