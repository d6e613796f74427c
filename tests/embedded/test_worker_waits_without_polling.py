"""The embedded worker (memory broker, a worker thread in the server's process) waits
for work on an in-process doorbell that every send rings, not by polling its queues.

Counted, not timed: how often the worker looks into its queues over an idle second
(the old 10 ms poll: about 100 times), and whether a sent task was taken on a ring or
only at the drain's backstop timeout (Celery's own, 2 s)."""

from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker
from kombu.transport import memory

from markus.bench import probe as bench_probe
from markus.celery import app
from markus.embedded import DOORBELL
from tests.attention.conftest import stop_waiting


@pytest.fixture(autouse=True)
def embedded_broker():
    """The embedded default's broker (the first pass of `make test`, no REDIS_URL), which
    these tests are about; they are not marked for the PostgreSQL and Redis pass."""
    assert app.conf.broker_url.startswith("memory"), "the embedded broker's worker: run it without REDIS_URL"


@pytest.fixture
def looks(monkeypatch):
    """How many times the worker has read one of its queues (every read, found or empty)."""
    counter = {"n": 0}
    get = memory.Channel._get

    def counted(self, queue, timeout=None):
        counter["n"] += 1
        return get(self, queue, timeout)

    monkeypatch.setattr(memory.Channel, "_get", counted)
    return counter


@pytest.fixture
def worker():
    app.conf.task_always_eager = False
    with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING") as w:
        time.sleep(0.3)  # past start-up
        yield w
        stop_waiting()


def _drain_probes():
    while not bench_probe.STARTS.empty():
        bench_probe.STARTS.get_nowait()


def test_an_idle_worker_does_not_look_into_its_queues(worker, looks):
    looks["n"] = 0
    time.sleep(1.0)
    # One look per backstop (Celery's drain timeout, 2 s) at most; the poll made ~100.
    assert looks["n"] <= 2


def test_a_sent_task_wakes_the_waiting_worker_at_once(worker):
    _drain_probes()
    for i in range(5):
        time.sleep(0.2)  # the worker is parked on the doorbell
        backstops = DOORBELL.timeouts
        bench_probe.probe.delay(f"k{i}")
        key, _ = bench_probe.STARTS.get(timeout=10)
        assert key == f"k{i}"
        # Taken on the ring of the send, not when the wait ran out.
        assert DOORBELL.timeouts == backstops


def test_a_task_queued_behind_a_full_worker_is_taken_when_the_slot_frees(worker):
    """prefetch 1, concurrency 1, late acks: the second task waits in the queue until
    the first is acked; the ack rings, so it is not left to the backstop."""
    _drain_probes()
    time.sleep(0.2)
    backstops = DOORBELL.timeouts
    for i in range(6):
        bench_probe.probe.delay(f"q{i}")
    keys = [bench_probe.STARTS.get(timeout=10)[0] for _ in range(6)]
    assert sorted(keys) == [f"q{i}" for i in range(6)]
    assert DOORBELL.timeouts == backstops


def test_a_worker_asked_to_stop_leaves_its_wait_on_the_ring():
    """Stopping a parked worker ends its wait when the stopper rings, not at the drain's
    timeout: a test's worker (``celery_worker``) stopped 2-4 s late before."""
    app.conf.task_always_eager = False
    with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING"):
        time.sleep(0.3)  # parked on the doorbell
        backstops = DOORBELL.timeouts
        stop_waiting()
    # start_worker has joined the worker's thread: its waits all ended on rings.
    assert DOORBELL.timeouts == backstops
