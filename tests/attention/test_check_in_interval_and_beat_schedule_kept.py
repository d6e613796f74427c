"""The agent's rhythm holds: the offline brain answers a chat asking for an absurd
check-in interval (the tool clamps it), and an operator's heartbeat and dream schedules
set in the console survive a restart."""

from __future__ import annotations

import pytest

from mailbox.registry import MailboxType

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
