"""Two beats (or a run that overlaps the next) telling stalls at the same time tell each
stall once: both read "not told yet" before either writes, unless the runs take turns.
The race is made certain: each run, once it is about to write its notice, waits (up to
a moment) for the other to get there too."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from attention import stalls
from notifications.models import UserNotification
from notifications.registry import NotificationType

from .test_stalls import focus

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_beats_at_once_tell_a_stall_once(agent, alice, monkeypatch):
    # Routed by markers (`postgres` runs only in the PostgreSQL pass): never skipped.
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"
    focus(agent, minutes_ago=20)
    both_about_to_write = threading.Barrier(2)
    real_notify = stalls.notify_user

    def notify_when_both_are_here(**kwargs):
        try:
            both_about_to_write.wait(timeout=1)
        except threading.BrokenBarrierError:
            pass  # the other run is not writing alongside (it waits its turn)
        return real_notify(**kwargs)

    monkeypatch.setattr(stalls, "notify_user", notify_when_both_are_here)
    told: list[list[str]] = []
    errors: list[BaseException] = []

    def beat() -> None:
        try:
            told.append(stalls.notify_stalls())
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    runs = [threading.Thread(target=beat) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(30)
    assert not errors, errors
    assert sorted(len(keys) for keys in told) == [0, 1], told
    notices = UserNotification.objects.filter(user=alice, type=NotificationType.AGENT_STALLED)
    assert notices.count() == 1


def test_a_beat_that_finds_another_telling_past_the_lock_timeout_leaves_it_to_that_one(agent, alice, settings):
    """A run that holds the stalls' turn longer than the lock timeout (a slow one, or one
    frozen mid-way) does not make the next beat fail: that beat tells nothing now, and
    the stall is told once the holder is done (by it, or by the next beat)."""
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"
    focus(agent, minutes_ago=20)
    settings.DATABASE_LOCK_TIMEOUT_MS = 300
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '300ms'")
    holding, release = threading.Event(), threading.Event()

    def another_beat_holding_the_turn() -> None:
        from django.db import transaction

        from mailbox.services import mailbox_lock_group

        try:
            with transaction.atomic():
                mailbox_lock_group("*", NotificationType.AGENT_STALLED, "stalls")
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=another_beat_holding_the_turn)
    holder.start()
    assert holding.wait(10)
    try:
        assert stalls.notify_stalls() == []
    finally:
        release.set()
        holder.join(10)
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert not UserNotification.objects.filter(user=alice, type=NotificationType.AGENT_STALLED).exists()
    assert len(stalls.notify_stalls()) == 1  # the next beat tells it
