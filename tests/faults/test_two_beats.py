"""Scenario 5: two ``celery beat`` processes run at once (a second scheduler started by
mistake, a failover that overlapped). Every agent must still get one heartbeat per
period. The heartbeat's beat interval is shortened to a few seconds for the test."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict

import pytest
from django.conf import settings

from .figures import assert_invariants, collect, settle
from .harness import SWEEP_SECONDS, boot

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

PERIOD = 4  # seconds between heartbeat_all runs of each beat
WINDOW = 13.0


def heartbeat_every(seconds: int) -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from attention.services import sync_beat_schedule

    sync_beat_schedule()
    every, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
    task = PeriodicTask.objects.get(task="attention.heartbeat_all")
    task.interval = every
    task.last_run_at = None
    task.save()


def heartbeats_by_agent() -> dict[str, list]:
    from mailbox.models import MailboxItem

    out: dict[str, list] = defaultdict(list)
    rows = MailboxItem.objects.filter(source_type="heartbeat").exclude(status="merged").order_by("queued_at")
    for agent_id, queued_at in rows.values_list("agent_id", "queued_at"):
        out[agent_id].append(queued_at)
    return out


def test_two_beats_give_one_heartbeat_per_agent_and_period(cluster, report, clock, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "SWEEP_SECONDS", float(SWEEP_SECONDS))
    seeded = boot(cluster, server=False, beats=0)
    heartbeat_every(PERIOD)
    cluster.start_beat("beat1")
    cluster.start_beat("beat2")
    time.sleep(WINDOW)
    for name in ("beat1", "beat2"):
        cluster.check_alive(name)
        cluster.kill(name)
    settled = settle(60)
    beats = heartbeats_by_agent()
    # Two heartbeats of one agent less than half a period apart: both beats fired.
    doubles = [
        f"{agent}@{b:%H:%M:%S.%f}"
        for agent, times in beats.items()
        for a, b in itertools.pairwise(times)
        if (b - a).total_seconds() < PERIOD / 2
    ]
    most = max((len(t) for t in beats.values()), default=0)
    figures = collect(others="n/a")
    figures.extra = (
        f"heartbeats={sum(len(t) for t in beats.values())} agents_with_heartbeat={len(beats)}/{len(seeded.agents)} "
        f"max_per_agent={most} periods={WINDOW / PERIOD:.1f} double_heartbeats={len(doubles)}"
    )
    report(figures.line("5 two-beats", clock()))
    assert beats, "no heartbeat at all: the beats did not run heartbeat_all"
    assert not doubles, f"an agent got two heartbeats in one period: {doubles[:8]}"
    assert most <= WINDOW / PERIOD + 1
    assert_invariants(figures, settled)
