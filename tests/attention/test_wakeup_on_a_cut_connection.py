"""A worker keeps its database connection between wake-ups without a health check
(Django's ``SELECT 1`` before each task's first statement was one more round trip on
the way from a wake-up to the claim). A connection the database cut meanwhile (a
restart, a terminated backend) fails the run's first statement, the lease's take, which
then never reached the database: the task closes it and runs once more on a new one,
so the wake-up is not lost."""

from __future__ import annotations

import time

import pytest
from django.db import connection, connections

from attention import tasks
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.celery import app

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline_brain(offline_loop):
    offline_loop(WAKE_ON_ENQUEUE=False)


@pytest.fixture
def kept_connection(monkeypatch):
    """This thread's connection as a worker keeps it (an age, no health check)."""
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", False)
    connection.ensure_connection()
    yield
    connection.close()


def _cut(pid: int) -> None:
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()


def test_a_wake_up_on_a_connection_the_database_cut_runs_its_item(agent, kept_connection):
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "s", "content": "c"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    _cut(pid)

    assert tasks.run_attention(agent.id) == "done"

    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED


@app.task(name="tests.attention.connection_kept_for")
def connection_kept_for() -> float:
    """In a task: this thread's connection opened, how long it is kept."""
    connection.ensure_connection()
    assert connection.close_at is not None
    return connection.close_at - time.monotonic()


def test_a_worker_keeps_the_connections_its_tasks_open_without_a_health_check(settings):
    from markus.celery import _keep_connections

    settings.WORKER_CONN_MAX_AGE = 60  # (pytest-django's settings: restored after)
    _keep_connections()
    connection.close()
    assert 50 < connection_kept_for.apply().get() <= 60
    assert not connection.health_check_enabled
    # Outside a task (a request's thread beside the embedded worker): the database's own
    # age, 0, closes it at the request's end.
    connection.close()
    connection.ensure_connection()
    assert connection.close_at is not None and connection.close_at <= time.monotonic()
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] == 0
