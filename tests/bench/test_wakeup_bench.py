"""``bench wakeup`` on the embedded runtime: it measures enqueue -> start beside a bare
Celery round trip on the same worker and counts the idle worker's reads of its queues
(the poll it replaced read them about 200 times a second). Figures are printed, never
asserted as times; the idle count is a count."""

from __future__ import annotations

import io

import pytest

from markus.bench import wakeup

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_wakeup_bench_prints_its_ratios_and_the_idle_worker_reads_nothing(settings):
    # The first pass of `make test` runs on the embedded default (no REDIS_URL), where
    # this test belongs: it is not marked for the PostgreSQL and Redis pass.
    assert not settings.REDIS_URL, "the embedded broker's bench: run it without REDIS_URL"
    out = io.StringIO()
    figures = {f.name: f for f in wakeup.run(out, {"n": 5})}
    ratio = figures["enqueue -> start p50 / bare Celery round trip p50"]
    assert ratio.value > 0 and "alternating rounds" in ratio.baseline
    kick = figures["enqueue -> the loop's task start p50 / bare Celery round trip p50"].value
    write = figures["the enqueue's write (stamp -> committed, wake-up sent) p50 / bare Celery round trip p50"].value
    assert 0 < write < kick  # the kick splits into the write and the broker's hop after it
    floor = figures["floor: the write, the hop and one statement after quiet, p50s / bare Celery round trip p50"]
    assert floor.value > 0 and "no loop at all" in floor.baseline
    assert figures["idle embedded worker: queue reads per second"].value == 0
    assert "enqueue -> item starts" in out.getvalue()
