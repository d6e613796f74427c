"""The embedded runtime: a Celery worker and beat inside this process, for the memory
transport and the in-memory channel layer (which only work within one process)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from celery.beat import EmbeddedService

if TYPE_CHECKING:
    from celery import Celery
    from celery.apps.worker import Worker


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
