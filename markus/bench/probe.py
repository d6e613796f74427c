"""The bare Celery round trip: a task that does nothing but note when it started.

The baseline of ``bench wakeup`` (enqueue -> loop start against apply_async -> task
start on the same worker, in the same run) and of the embedded worker's tests. A
worker started with ``-A markus.bench.probe`` runs the project's tasks and this one.

Where the start is noted: in this process (a worker thread on the embedded broker)
into ``STARTS``; with ``REDIS_URL`` (a worker subprocess) as ``RPUSH key <ns>`` on the
broker's Redis. Both stamp ``time.monotonic_ns()`` (CLOCK_MONOTONIC, shared by the
processes of one machine), so the sender subtracts its own stamp taken just before
``apply_async``.

The worker also notes when each run of the attention loop began (``task_prerun`` of
``run_attention``), so the benchmark can split enqueue -> item start into the kick
(until the task starts) and the loop's own way to the claim."""

from __future__ import annotations

import queue
import time
from typing import Any

from celery import signals

from markus.celery import app

PROBE = "markus.bench.probe"
STARTS: queue.Queue[tuple[str, int]] = queue.Queue()  # (key, started ns), in-process


@app.task(name=PROBE, ignore_result=True)
def probe(key: str) -> None:
    started = time.monotonic_ns()
    from django.conf import settings

    if settings.REDIS_URL:
        import redis

        redis.Redis.from_url(settings.REDIS_URL).rpush(key, started)
    else:
        STARTS.put((key, started))


# When each agent's run of the loop began, for ``bench wakeup`` (enqueue -> the kick's
# task start): the first start after the bench cleared the agent's mark. Noted in memory
# as the task starts; a worker subprocess hands it to the broker's Redis only once the
# run has ended, so the noting costs the measured way nothing (a Redis connection and a
# SET before the run's first statement added about a millisecond to it).
RUN_ATTENTION = "attention.run_attention"
RUN_KEY = "bench:run-started:{agent_id}"
RUN_STARTS: dict[str, int] = {}  # agent id -> ns, in-process


@signals.task_prerun.connect
def _note_run_start(task: Any = None, args: Any = None, **kwargs: Any) -> None:
    if task is None or task.name != RUN_ATTENTION or not args:
        return
    RUN_STARTS.setdefault(args[0], time.monotonic_ns())


@signals.task_postrun.connect
def _hand_run_start_over(task: Any = None, args: Any = None, **kwargs: Any) -> None:
    from django.conf import settings

    if task is None or task.name != RUN_ATTENTION or not args or not settings.REDIS_URL:
        return
    started = RUN_STARTS.pop(args[0], None)
    if started is not None:
        import redis

        redis.Redis.from_url(settings.REDIS_URL).set(RUN_KEY.format(agent_id=args[0]), started, nx=True, ex=60)


# When the wake-up of each agent's run was handed to the broker (``before_task_publish``,
# in the process that enqueued: the benchmark's own), so that the kick splits into the
# enqueue's write (stamp -> its commit, then the wake-up) and the broker's hop (-> task start).
WAKE_SENT: dict[str, int] = {}  # agent id -> ns, in the publishing process


@signals.before_task_publish.connect
def _note_wake_sent(sender: str | None = None, body: Any = None, **kwargs: Any) -> None:
    if sender != RUN_ATTENTION or not body or not body[0]:
        return
    WAKE_SENT.setdefault(body[0][0], time.monotonic_ns())
