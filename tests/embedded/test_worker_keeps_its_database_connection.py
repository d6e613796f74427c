"""A Celery worker keeps its PostgreSQL connection between tasks (``WORKER_CONN_MAX_AGE``):
every wake-up of an agent is a task, and a new connection forks a server backend.

Celery's Django fixup closed every connection before and after each task whatever
CONN_MAX_AGE said; ``markus.celery`` now closes them by Django's rule instead. Held by
the backend's pid, which is the same across tasks only on a kept connection."""

from __future__ import annotations

import queue

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection

from markus.celery import app

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PIDS: queue.Queue[int] = queue.Queue()


@app.task(name="tests.embedded.backend_pid", ignore_result=True)
def backend_pid(close: bool = False) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        PIDS.put(cursor.fetchone()[0])
    if close:  # the test's last task: the worker thread lets its connection go
        connection.close()


def _pids(n: int) -> list[int]:
    for i in range(n):
        backend_pid.delay(close=i == n - 1)
    return [PIDS.get(timeout=30) for _ in range(n)]


@pytest.fixture
def worker_conn_max_age(monkeypatch):
    """The setting, and the databases' CONN_MAX_AGE restored after the worker changed them."""
    kept = {alias: dict(database) for alias, database in settings.DATABASES.items()}
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 60, raising=False)
    yield
    for alias, database in settings.DATABASES.items():
        database.clear()
        database.update(kept[alias])


def _worker():
    app.conf.task_always_eager = False
    return start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING")


def test_a_worker_keeps_its_connection_between_tasks(worker_conn_max_age):
    with _worker():
        pids = _pids(4)
    assert len(set(pids)) == 1, pids


def test_with_no_age_each_task_gets_a_new_connection(monkeypatch):
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 0, raising=False)
    with _worker():
        pids = _pids(3)
    assert len(set(pids)) == 3, pids
