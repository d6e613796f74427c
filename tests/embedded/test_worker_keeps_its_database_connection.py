"""A Celery worker keeps its database connection between tasks (``WORKER_CONN_MAX_AGE``):
every wake-up of an agent is a task, and a new connection costs a PostgreSQL backend's
fork, or on SQLite an open that sets WAL (3.7 ms measured, of a 10 ms budget).

Celery's Django fixup closed every connection before and after each task whatever
CONN_MAX_AGE said; ``markus.celery`` now closes them by Django's rule instead. Held by
the driver's connection object each task ran on (kept alive here, so two tasks on
the same object were on one connection), on both databases."""

from __future__ import annotations

import queue
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection

from markus.celery import app

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

USED: queue.Queue[Any] = queue.Queue()


@app.task(name="tests.embedded.connection_used", ignore_result=True)
def connection_used(close: bool = False) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    USED.put(connection.connection)
    if close:  # the test's last task: the worker thread lets its connection go
        connection.close()


def _connections(n: int) -> list[Any]:
    for i in range(n):
        connection_used.delay(close=i == n - 1)
    return [USED.get(timeout=30) for _ in range(n)]


@pytest.fixture
def databases_restored():
    """The worker changes the process's DATABASES (CONN_MAX_AGE): restored after."""
    kept = {alias: dict(database) for alias, database in settings.DATABASES.items()}
    yield
    for alias, database in settings.DATABASES.items():
        database.clear()
        database.update(kept[alias])


def _worker():
    app.conf.task_always_eager = False
    return start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING")


def test_a_worker_keeps_its_connection_between_tasks(databases_restored, monkeypatch):
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 60)
    with _worker():
        used = _connections(4)
    assert all(c is used[0] for c in used), used


def test_with_no_age_each_task_gets_a_new_connection(databases_restored, monkeypatch):
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 0)
    with _worker():
        used = _connections(3)
    assert len({id(c) for c in used}) == 3, used
