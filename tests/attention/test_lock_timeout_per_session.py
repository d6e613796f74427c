"""Every PostgreSQL session carries the lock timeout from its start, as it carries the
statement timeout: a fenced transaction of the lease sends no statement of its own to
bound its lock waits (it sent ``SET LOCAL lock_timeout`` in each, one round trip of
the loop's way from a wake-up to the claim), and a lock held by another session is
still given up after ``DATABASE_LOCK_TIMEOUT_MS``."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.lease import LeaseBusy, fenced, lease_take
from markus.core.db import bounded_lock_wait
from tests.locks import row_locked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _needs_postgres() -> None:
    # Routed by markers (`postgres` runs only in the PostgreSQL pass): never skipped.
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"


def test_a_new_session_starts_with_the_lock_timeout():
    _needs_postgres()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout')")
        (value,) = cursor.fetchone()
    assert value == f"{settings.DATABASE_LOCK_TIMEOUT_MS}ms" or value == f"{settings.DATABASE_LOCK_TIMEOUT_MS // 1000}s"


def test_a_fenced_transaction_sends_one_statement_for_its_check(agent):
    _needs_postgres()
    lease = lease_take(agent.id)
    assert lease is not None
    with CaptureQueriesContext(connection) as ctx, fenced(lease):
        pass
    sent = [q["sql"].split()[0] for q in ctx.captured_queries]
    assert sent == ["BEGIN", "SELECT", "COMMIT"], ctx.captured_queries
    with CaptureQueriesContext(connection) as ctx, bounded_lock_wait():
        pass
    assert not [q for q in ctx.captured_queries if "lock_timeout" in q["sql"]], ctx.captured_queries


def test_a_row_lock_held_by_another_session_is_given_up_after_the_lock_timeout(agent, settings):
    _needs_postgres()
    lease = lease_take(agent.id)
    assert lease is not None
    began = time.monotonic()
    with row_locked("agent_attention", agent.id, key="agent_id"):
        with pytest.raises(LeaseBusy), fenced(lease, state="focused"):
            pass
        waited = time.monotonic() - began
    # Given up, not waited out until the statement timeout (30 s).
    assert waited < settings.DATABASE_STATEMENT_TIMEOUT_MS / 1000 / 2
