"""A worker keeps its database connection between wake-ups without a health check
(Django's ``SELECT 1`` before each task's first statement was one more round trip on
the way from a wake-up to the claim). A connection the database cut meanwhile (a
restart, a terminated backend) fails the run's first statement, the lease's take, which
then never reached the database: the task closes it and runs once more on a new one,
so the wake-up is not lost."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from attention import tasks
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue

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


def test_a_worker_keeps_its_connection_without_a_health_check(settings, monkeypatch):
    from markus.celery import _keep_connections

    database = settings.DATABASES["default"]
    settings.WORKER_CONN_MAX_AGE = 60  # (pytest-django's settings: restored after)
    monkeypatch.setitem(database, "CONN_MAX_AGE", 0)
    monkeypatch.setitem(database, "CONN_HEALTH_CHECKS", False)
    _keep_connections()
    assert database["CONN_MAX_AGE"] == 60
    assert not database["CONN_HEALTH_CHECKS"]
