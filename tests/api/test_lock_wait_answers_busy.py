"""A request whose statement waits for a row lock past the session's lock_timeout is
answered 503 with Retry-After, never a 500: the API with its JSON error (``code:
busy``), a page or the admin with a plain 503. Another PostgreSQL session holds the
row (``SELECT ... FOR UPDATE`` in an open transaction) while the request updates it.
``markus.core.db.retry_later`` says what counts; both doors ask it (a database that
cannot be reached at all: ``tests/faults/test_requests_while_the_database_is_down.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client

from markus.core import db
from tests.locks import row_locked

SHORT_MS = 300


def _needs_postgres() -> None:
    # Routed by markers (`postgres` runs only in the PostgreSQL pass): never skipped.
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"


@pytest.fixture
def short_lock_timeout(settings) -> Iterator[None]:
    """A lock timeout of SHORT_MS for this test's session (the request runs on it), in
    the settings too (the Retry-After says it)."""
    _needs_postgres()
    settings.DATABASE_LOCK_TIMEOUT_MS = SHORT_MS
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = %s", [f"{SHORT_MS}ms"])
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")


@pytest.mark.postgres  # another PostgreSQL session holds the row (the rule below: both passes)
@pytest.mark.django_db(transaction=True)
def test_an_api_write_on_a_locked_row_answers_503_with_retry_after(short_lock_timeout, alice_client, agent):
    with row_locked("agents", agent.id):
        response = alice_client.patch(f"/api/agents/{agent.id}/", {"name": "Ada II"}, format="json")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "1"
    body = response.json()
    assert body["code"] == "busy"
    assert "try again" in body["detail"], body
    # Nothing was half done, and once the lock is gone the same write goes through.
    agent.refresh_from_db()
    assert agent.name == "Ada"
    again = alice_client.patch(f"/api/agents/{agent.id}/", {"name": "Ada II"}, format="json")
    assert again.status_code == 200, again.content


@pytest.mark.postgres  # another PostgreSQL session holds the row (the rule below: both passes)
@pytest.mark.django_db(transaction=True)
def test_an_admin_change_on_a_locked_row_answers_503(short_lock_timeout, django_user_model, alice, bob, team):
    django_user_model.objects.create_superuser("operator", "op@example.com", "pw-operator")
    operator = Client()
    assert operator.login(username="operator", password="pw-operator")
    url = f"/admin/agents/team/{team.id}/change/"
    form = {
        "name": "Core II",
        "owner": str(alice.pk),
        "members": [str(bob.pk)],
        "agent_task_approval": "on",
        "created_at_0": team.created_at.strftime("%Y-%m-%d"),
        "created_at_1": team.created_at.strftime("%H:%M:%S"),
    }
    with row_locked("teams", team.id):
        response = operator.post(url, form)
    assert response.status_code == 503, response.content[:500]
    assert response["Retry-After"] == "1"
    assert b"try again" in response.content
    team.refresh_from_db()
    assert team.name == "Core"
    # The control: the same form, the row free, is saved.
    saved = operator.post(url, form)
    assert saved.status_code == 302, saved.content[:2000]
    team.refresh_from_db()
    assert team.name == "Core II"


def test_only_a_lock_wait_counts_as_busy():
    """The rule both doors ask: PostgreSQL's lock_not_available and SQLite's "database
    is locked" are a lock wait given up; any other database error is not."""
    from django.db import IntegrityError, OperationalError

    class Cause(Exception):
        sqlstate = "55P03"

    lock = OperationalError("canceling statement due to lock timeout")
    lock.__cause__ = Cause()
    assert db.lock_timed_out(lock)
    assert db.lock_timed_out(OperationalError("database is locked"))
    assert not db.lock_timed_out(OperationalError("server closed the connection unexpectedly"))
    assert not db.lock_timed_out(IntegrityError("duplicate key value"))
    assert not db.lock_timed_out(ValueError("database is locked"))
