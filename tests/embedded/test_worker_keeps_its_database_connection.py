"""A Celery worker keeps its database connection between tasks (``WORKER_CONN_MAX_AGE``):
every wake-up of an agent is a task, and a new connection costs a PostgreSQL backend's
fork, or on SQLite an open that sets WAL (3.7 ms measured, of a 10 ms budget).

Celery's Django fixup closed every connection before and after each task whatever
CONN_MAX_AGE said; ``markus.celery`` now closes them by Django's rule instead. Held by
the driver's connection object each task ran on (kept alive here, so two tasks on
the same object were on one connection), on both databases.

Only the worker's: beside the embedded worker (``manage.py up`` without REDIS_URL) the
server's requests run each on a thread of its own that ends with it (Django's ASGI
handler), so a connection a request kept was never used again and stayed open until the
garbage collector found it. On PostgreSQL one fuzzing client ran the server out of
connections ("too many clients": 503s on every door)."""

from __future__ import annotations

import asyncio
import gc
import queue
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import connection
from django.db.backends.signals import connection_created

from markus.agents.services import user_token_create
from markus.celery import app
from markus.core.waits import ParkingASGIHandler
from tests.agentbus.test_door_hops import asgi_get

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


def _worker():
    app.conf.task_always_eager = False
    return start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING")


def test_a_worker_keeps_its_connection_between_tasks(monkeypatch):
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 60)
    with _worker():
        used = _connections(4)
    assert all(c is used[0] for c in used), used


def test_with_no_age_each_task_gets_a_new_connection(monkeypatch):
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 0)
    with _worker():
        used = _connections(3)
    assert len({id(c) for c in used}) == 3, used


def test_beside_a_worker_a_request_does_not_keep_its_connection(alice, monkeypatch):
    monkeypatch.setattr(settings, "WORKER_CONN_MAX_AGE", 60)
    _, token = user_token_create(alice)
    auth = {"Authorization": f"Token {token}"}
    opened: list[Any] = []

    def note(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(connection)

    gc.disable()  # an unclosed connection would otherwise close when the collector frees it
    connection_created.connect(note)
    try:
        with _worker():  # its worker_init has run in this process, as with `manage.py up`
            answers = [asyncio.run(asgi_get(ParkingASGIHandler(), "/api/agents/", "", auth, [])) for _ in range(3)]
            assert [status for status, _, _ in answers] == [200, 200, 200]
    finally:
        connection_created.disconnect(note)
        gc.enable()
    assert len(opened) >= 3  # a request's thread is new each time: a connection each
    assert [c for c in opened if c.connection is not None] == []
