"""Wake-up benchmark: how soon an enqueued item starts, beside a bare Celery task round
trip on the same worker in the same run.

Steps:
1. One worker, as the attention benchmark starts it: a thread of this process on the
   embedded broker, or with ``REDIS_URL`` a ``celery worker -c 1 -P threads``
   subprocess (same environment), here with ``-A markus.bench.probe`` so that it also
   runs the probe task. A throwaway internal agent, the offline brain, wake-up on
   enqueue as in production.
2. ``ROUNDS`` times, alternating (so both see the same load):
   - the baseline: stamp ``monotonic_ns``, ``apply_async`` the probe (a task that only
     notes when it started, ``markus.bench.probe``), the probe's start minus the stamp;
   - enqueue -> start: ``mailbox_enqueue`` one item (its wake-up sent on commit), wait
     until the loop has taken it and completed it; ``started_at - queued_at`` of the
     stored row. In-process the writer waits for the item's ``agent:mailbox`` events
     (blocked, as a request thread would be, not polling beside the worker's threads);
     with a worker subprocess it polls the row and then the lease. The kick (enqueue
     -> the run's task start) splits into the enqueue's write (until Celery's
     ``before_task_publish`` of the wake-up, sent on commit) and the broker's hop; the
     loop's own way is the item's start minus the run's task start, round by round.
   Each round ends with ``GAP`` of quiet, so every wake-up finds an idle worker.
3. On the embedded broker: how often the idle worker looks into its queues in one
   second (kombu's memory transport polled: about 100 times a queue a second).
"""

from __future__ import annotations

import queue
import statistics
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from markus.bench.report import Figure
from markus.bench.workers import start_worker

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "wakeup"
ROUNDS = 60
WARMUP = 5
IDLE_S = 1.0
GAP = 0.03  # seconds after each round: every wake-up finds an idle worker


def _probe_wait(key: str, timeout: float = 30.0) -> int:
    """When the probe ``key`` started (monotonic ns)."""
    from django.conf import settings

    from markus.bench import probe

    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout + 5)
        got = client.blpop([key], timeout=timeout)
        if got is None:
            raise RuntimeError(f"the probe {key} did not start within {timeout:.0f} s")
        return int(got[1])
    while True:
        done, started = probe.STARTS.get(timeout=timeout)
        if done == key:
            return started


def _probe_round_trip() -> float:
    from markus.bench import probe

    key = f"bench:probe:{uuid.uuid4().hex}"
    sent = time.monotonic_ns()
    probe.probe.apply_async((key,))
    started = _probe_wait(key)
    time.sleep(GAP)  # the task ends and is acked: the worker is idle
    return (started - sent) / 1e6


def _idle_round_trip() -> float:
    """One ``SELECT 1`` on this process's connection after ``GAP`` of quiet (ms): what any
    statement costs a process that waited, as the worker's first after a wake-up does."""
    from django.db import connection

    time.sleep(GAP)
    with connection.cursor() as cursor:
        began = time.monotonic_ns()
        cursor.execute("SELECT 1")
        cursor.fetchone()
        took = time.monotonic_ns() - began
    time.sleep(GAP)
    return took / 1e6


def _start_worker(stdout: SupportsWrite[str]) -> Callable[[], None]:
    from markus.bench import probe  # registered before the worker starts

    return start_worker(stdout, app=probe.app, module="markus.bench.probe", name="bench-wakeup")


class _Watcher:
    """The ``agent:mailbox`` events of this process (the embedded worker's), so that the
    writer waits for an item's start and end blocked on a queue instead of polling the
    database from a thread that would compete with the worker's for the GIL."""

    def __init__(self) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()

    def __call__(self, group: str, event: dict[str, Any]) -> None:
        if event.get("type") == "agent:mailbox":
            self.events.put(event["item"])

    def wait(self, item_id: str, statuses: tuple[str, ...], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            if shown.get("id") == item_id and shown.get("status") in statuses:
                return


def _enqueue_to_start(agent_id: str, i: int, watcher: _Watcher | None) -> tuple[float, float, float]:
    """One lone item: enqueue (its wake-up sent on commit), wait until the loop started
    it and, for the next round, until it is done and the worker idle again. Returns
    (enqueue -> the run's task start, enqueue -> the item's start, enqueue -> its wake-up
    handed to the broker), ms."""
    from django.utils import timezone

    from attention.models import AgentAttention
    from mailbox.models import MailboxItem
    from mailbox.registry import MailboxType, Status
    from mailbox.services import mailbox_enqueue
    from markus.bench import probe

    _clear_run_start(agent_id)
    probe.WAKE_SENT.pop(agent_id, None)
    sent = time.monotonic_ns()
    item = mailbox_enqueue(
        agent_id=agent_id,
        source_type=MailboxType.SYSTEM_EVENT,
        payload={"summary": f"wakeup {i}", "content": f"wakeup {i}"},
    )
    deadline = time.monotonic() + 30
    if watcher is not None:
        watcher.wait(item.id, (Status.COMPLETED, Status.DROPPED), timeout=30)
    else:
        while MailboxItem.objects.filter(id=item.id, started_at__isnull=True).exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not start an item within 30 s")
            time.sleep(0.001)
        while time.monotonic() < deadline and (
            MailboxItem.objects.filter(id=item.id).exclude(status=Status.COMPLETED).exists()
            or AgentAttention.objects.filter(agent_id=agent_id, lease_expires_at__gt=timezone.now())
            .exclude(lease_owner="")
            .exists()
        ):
            time.sleep(0.002)
    row = MailboxItem.objects.filter(id=item.id).values("started_at", "queued_at").get()
    if row["started_at"] is None:
        raise RuntimeError(f"item {item.id} ended without being started")
    run_started = _run_start(agent_id)
    woken = probe.WAKE_SENT.pop(agent_id)
    time.sleep(GAP)  # the run lets go of the lease and its task ends: the worker is idle
    return (
        (run_started - sent) / 1e6,
        float((row["started_at"] - row["queued_at"]).total_seconds() * 1000),
        (woken - sent) / 1e6,
    )


def _clear_run_start(agent_id: str) -> None:
    from django.conf import settings

    from markus.bench import probe

    if settings.REDIS_URL:
        import redis

        redis.Redis.from_url(settings.REDIS_URL).delete(probe.RUN_KEY.format(agent_id=agent_id))
    else:
        probe.RUN_STARTS.pop(agent_id, None)


def _run_start(agent_id: str) -> int:
    from django.conf import settings

    from markus.bench import probe

    value: bytes | int | None
    if settings.REDIS_URL:
        import redis

        # The worker hands the start over once its run has ended (``probe``): a moment
        # after the lease is let go, which the round waited for.
        client, key = redis.Redis.from_url(settings.REDIS_URL), probe.RUN_KEY.format(agent_id=agent_id)
        deadline = time.monotonic() + 10
        value = client.get(key)  # type: ignore[assignment]
        while value is None and time.monotonic() < deadline:
            time.sleep(0.001)
            value = client.get(key)  # type: ignore[assignment]
    else:
        value = probe.RUN_STARTS.get(agent_id)
    if value is None:
        raise RuntimeError(f"no run of the loop started for {agent_id}")
    return int(value)


def _idle_looks(seconds: float) -> int:
    """Reads of the broker's queues by the idle embedded worker in ``seconds``."""
    from unittest import mock

    from kombu.transport import memory

    looks = 0
    get = memory.Channel._get

    def counted(self: Any, queue: str, timeout: float | None = None) -> Any:
        nonlocal looks
        looks += 1
        return get(self, queue, timeout)

    with mock.patch.object(memory.Channel, "_get", counted):
        time.sleep(seconds)
    return looks


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    from django.conf import settings
    from django.db import connection

    from markus.agents.models import Agent
    from markus.agents.services import agent_create
    from markus.core import events
    from markus.core.ids import new_id

    rounds = options.get("n") or ROUNDS
    rounds = min(rounds, 500)  # ``bench all --n`` is sized for the queues
    old = dict(settings.MARKUS)
    settings.MARKUS.update(WAKE_ON_ENQUEUE=True, LLM_PROVIDER="offline")
    agent, _ = agent_create(name="bench-wakeup", agent_id=new_id("bench"))
    stop = None
    bare: list[float] = []
    kicked: list[float] = []
    started: list[float] = []
    written: list[float] = []
    idle: list[float] = []
    looks = None
    embedded = not settings.REDIS_URL
    watcher = _Watcher() if embedded else None
    if watcher is not None:
        events.add_listener(watcher)
    try:
        stdout.write(f"wake-up benchmark on {connection.vendor}, one worker, {rounds} rounds\n")
        stop = _start_worker(stdout)
        for i in range(WARMUP):
            _probe_round_trip()
            _enqueue_to_start(agent.id, -1 - i, watcher)
        if embedded:
            time.sleep(0.3)
            looks = _idle_looks(IDLE_S)
        for i in range(rounds):
            bare.append(_probe_round_trip())
            idle.append(_idle_round_trip())
            kick, start, write = _enqueue_to_start(agent.id, i, watcher)
            kicked.append(kick)
            started.append(start)
            written.append(write)
    finally:
        if watcher is not None:
            events.remove_listener(watcher)
        Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
        if stop is not None:
            stop()
        settings.MARKUS.clear()
        settings.MARKUS.update(old)
        agent.delete()
    b50, k50, s50 = statistics.median(bare), statistics.median(kicked), statistics.median(started)
    # The loop's own way, round by round: the run's task start -> the item's start.
    own50 = statistics.median(s - k for s, k in zip(started, kicked, strict=True))
    # The kick, split: the enqueue's write (its commit, then the wake-up handed to the
    # broker) and the broker's hop to the task start, round by round.
    w50 = statistics.median(written)
    hop50 = statistics.median(k - w for k, w in zip(kicked, written, strict=True))
    # The least enqueue -> start can be: the write, the hop, and the take as one statement
    # of a process that sat idle (its first statement pays the wait for the database).
    idle50 = statistics.median(idle)
    floor = w50 + hop50 + idle50
    ratio = s50 / b50
    stdout.write(f"  bare Celery round trip   p50 {b50:6.2f} ms   (apply_async -> task start, same worker)\n")
    stdout.write(f"  enqueue -> run starts    p50 {k50:6.2f} ms   ratio {k50 / b50:.2f}   (the kick)\n")
    stdout.write(f"    the enqueue's write    p50 {w50:6.2f} ms   ratio {w50 / b50:.2f}   (committed, woken)\n")
    stdout.write(f"    the broker's hop       p50 {hop50:6.2f} ms   ratio {hop50 / b50:.2f}   (-> task start)\n")
    stdout.write(f"  enqueue -> item starts   p50 {s50:6.2f} ms   ratio {ratio:.2f}\n")
    stdout.write(f"  a statement after quiet  p50 {idle50:6.2f} ms   (SELECT 1 after {GAP * 1000:.0f} ms idle)\n")
    stdout.write(f"  floor: write+hop+that    p50 {floor:6.2f} ms   ratio {floor / b50:.2f}\n")
    stdout.write(f"  run starts -> item starts p50 {own50:5.2f} ms   ratio {own50 / b50:.2f}   (the loop's way)\n")
    figures = [
        Figure(
            SUITE,
            "enqueue -> start p50 / bare Celery round trip p50",
            ratio,
            "x",
            baseline=f"{s50:.2f} vs {b50:.2f} ms, {rounds} alternating rounds, one worker",
            goal=2.0,
            better="lower",
        ),
        Figure(
            SUITE,
            "enqueue -> the loop's task start p50 / bare Celery round trip p50",
            k50 / b50,
            "x",
            baseline=f"{k50:.2f} vs {b50:.2f} ms: the kick alone (commit, on_commit, broker, worker)",
            better="lower",
        ),
        Figure(
            SUITE,
            "the enqueue's write (stamp -> committed, wake-up sent) p50 / bare Celery round trip p50",
            w50 / b50,
            "x",
            baseline=f"{w50:.2f} vs {b50:.2f} ms: the item's INSERT and its commit; the hop after it {hop50:.2f} ms",
            better="lower",
        ),
        Figure(
            SUITE,
            "floor: the write, the hop and one statement after quiet, p50s / bare Celery round trip p50",
            floor / b50,
            "x",
            baseline=f"{w50:.2f} + {hop50:.2f} + {idle50:.2f} ms vs {b50:.2f} ms: enqueue -> start with no loop at all",
            better="lower",
        ),
        Figure(
            SUITE,
            "the loop's task start -> item start p50 (per round) / bare Celery round trip p50",
            own50 / b50,
            "x",
            baseline=f"{own50:.2f} vs {b50:.2f} ms: the take, the fenced claim and the Python between",
            better="lower",
        ),
        Figure(
            SUITE,
            "enqueue -> start p50",
            s50,
            "ms",
            baseline=f"bare Celery round trip p50 {b50:.2f} ms",
            goal=10.0,
            better="lower",
        ),
    ]
    if looks is not None:
        stdout.write(f"  idle worker: {looks} looks into its queues in {IDLE_S:.0f} s\n")
        figures.append(
            Figure(
                SUITE,
                "idle embedded worker: queue reads per second",
                looks / IDLE_S,
                "/s",
                baseline="a 10 ms poll reads each queue 100 times a second",
                goal=1.0,
                better="lower",
            )
        )
    return figures
