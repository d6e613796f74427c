"""The embedded runtime: a Celery worker and beat inside this process, for the memory
transport and the in-memory channel layer (which only work within one process).

The memory broker without a poll (``MemoryTransport``, settings:
CELERY_BROKER_TRANSPORT). kombu's memory transport finds work by polling: when its
queues are empty the worker sleeps ``polling_interval`` and looks again, so a wake-up
waited half an interval on average (10 ms here made 5 ms of every enqueue -> start)
and an idle server looked into its queues about 200 times a second. Here every
producer and consumer of the broker is in this process, so a send can wake the worker
directly: each put, ack and reject rings one ``DOORBELL`` (a condition and a counter),
and a worker with nothing to take waits on it until it rings or the drain's own
timeout (Celery's consumer passes 2 s) runs out. The counter is read before the queues
are, so a send between the look and the wait is never missed. An ack rings too: with
late acks and prefetch 1 the next message may only be taken once the last is acked.
A worker asked to stop (Celery's ``should_stop`` / ``should_terminate``) waits no more:
asked and rung, it ends at once, not at the drain's timeout.
"""

from __future__ import annotations

import threading
import time
from queue import Empty
from typing import TYPE_CHECKING, Any

from celery.beat import EmbeddedService
from kombu.transport import memory

from markus.core.shutdown import worker_stopping

if TYPE_CHECKING:
    from celery import Celery
    from celery.apps.worker import Worker


BACKSTOP_S = 5.0  # the longest wait when the caller of drain_events gives no timeout


class Doorbell:
    """Rung on every change a waiting consumer could act on; counts what it saw
    (``rings``, the waits that ended on a ring: ``wakeups``, at the timeout:
    ``timeouts``) for the tests and ``bench wakeup``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.rings = 0
        self.wakeups = 0
        self.timeouts = 0

    def ring(self) -> None:
        with self._cond:
            self.rings += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Until a ring after ``seen`` (a value of ``rings`` read earlier), at most
        ``timeout`` seconds; True when it rang."""
        with self._cond:
            rang = self._cond.wait_for(lambda: self.rings != seen, timeout)
            if rang:
                self.wakeups += 1
            else:
                self.timeouts += 1
            return rang


DOORBELL = Doorbell()


class MemoryChannel(memory.Channel):
    """kombu's memory channel (the same process-wide queues) that rings on each change."""

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        super()._put(queue, message, **kwargs)
        DOORBELL.ring()

    def _put_fanout(self, exchange: str, message: Any, routing_key: str | None = None, **kwargs: Any) -> None:
        super()._put_fanout(exchange, message, routing_key, **kwargs)
        DOORBELL.ring()

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple)
        DOORBELL.ring()  # a prefetch slot is free

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue)
        DOORBELL.ring()


class MemoryTransport(memory.Transport):
    """The memory transport whose consumer waits on the ``DOORBELL`` instead of polling."""

    Channel = MemoryChannel
    polling_interval = None  # type: ignore[assignment]  # never sleeps: waits on the doorbell
    # No host to default to (kombu would warn "No hostname was supplied" on every info()).
    default_connection_params: dict[str, Any] = {}

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        started = time.monotonic()
        cycle = self.cycle
        assert cycle is not None  # made by the transport's __init__
        while True:
            seen = DOORBELL.rings
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                pass
            if worker_stopping():
                raise TimeoutError()  # nothing to take and asked to stop: the consumer checks its flags next
            if timeout is None:
                DOORBELL.wait(seen, BACKSTOP_S)
                continue
            left = timeout - (time.monotonic() - started)
            if left <= 0 or not DOORBELL.wait(seen, left):
                raise TimeoutError()  # socket.timeout, which the consumer expects


def start_worker_thread(
    app: Celery, *, concurrency: int = 2, loglevel: str = "WARNING"
) -> tuple[Worker, threading.Thread]:
    """Run a real Celery worker consuming in a daemon thread; returns (worker, thread)."""
    worker = app.Worker(
        pool="threads",
        concurrency=concurrency,
        loglevel=loglevel,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        hostname=f"embedded@{threading.get_ident()}",
        quiet=True,
    )
    thread = threading.Thread(target=worker.start, name="celery-worker", daemon=True)
    thread.start()
    return worker, thread


def start_beat_thread(app: Celery) -> threading.Thread:
    """Beat in a thread, on django-celery-beat's DatabaseScheduler (EmbeddedService
    would otherwise default to the file-based PersistentScheduler). With ``thread=True``
    the service is a ``threading.Thread`` subclass."""
    from celery.utils.imports import symbol_by_name

    beat = EmbeddedService(app, thread=True, scheduler_cls=symbol_by_name(app.conf.beat_scheduler))
    beat.start()
    return beat
