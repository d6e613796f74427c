"""Which database errors a web request answers with 503 and Retry-After
(``markus.core.db.retry_later``): a connection PostgreSQL refused, cut or is shutting
down, never a statement's own error (a timeout, a broken constraint, SQLite's), which
stays the caller's answer or a 500. The real outage is held on a crashed server
(``tests/faults/test_requests_while_the_database_is_down.py``)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from django.db import IntegrityError, InterfaceError, OperationalError
from psycopg import errors

from markus.core.db import database_unreachable, retry_later


def _as_django_raises(django_error: type[Exception], cause: BaseException) -> Exception:
    """As Django's ``DatabaseErrorWrapper`` raises a driver's error: its own class, the
    driver's error as the cause."""
    exc = django_error(*cause.args)
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    "exc",
    [
        _as_django_raises(OperationalError, psycopg.OperationalError("connection failed: Connection refused")),
        _as_django_raises(OperationalError, psycopg.OperationalError("server closed the connection unexpectedly")),
        _as_django_raises(InterfaceError, psycopg.InterfaceError("the connection is closed")),
        _as_django_raises(OperationalError, errors.AdminShutdown("terminating connection")),
        _as_django_raises(OperationalError, errors.CannotConnectNow("the database system is starting up")),
    ],
    ids=["refused", "cut", "closed", "shutting-down", "starting-up"],
)
def test_a_connection_that_failed_asks_to_retry_later(exc: Exception) -> None:
    assert database_unreachable(exc)
    later = retry_later(exc)
    assert later is not None and later.code == "unavailable" and later.seconds == 5
    assert later.message == "the database cannot be reached; try again in 5 s"


@pytest.mark.parametrize(
    "exc",
    [
        _as_django_raises(OperationalError, errors.QueryCanceled("canceling statement due to statement timeout")),
        _as_django_raises(IntegrityError, errors.UniqueViolation("duplicate key")),
        _as_django_raises(OperationalError, sqlite3.OperationalError("no such table: agents")),
        OperationalError("raised without a driver's error"),
        ValueError("not a database error"),
    ],
    ids=["statement-timeout", "constraint", "sqlite", "no-cause", "not-the-database"],
)
def test_a_statements_own_error_does_not(exc: Exception) -> None:
    assert not database_unreachable(exc)
    assert retry_later(exc) is None
