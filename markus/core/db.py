"""Small query helpers shared by the apps, and bounded lock waits (the attention lease's,
``attention.lease``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, InternalError, OperationalError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import F, Func, IntegerField, QuerySet, Subquery
from django.db.models.functions import Coalesce

T = TypeVar("T")


def count_subquery(queryset: QuerySet) -> Coalesce:
    """COUNT(*) of a correlated queryset as a scalar subquery (0 when empty), so a
    list can carry a per-row count in the same query."""
    counted = queryset.order_by().annotate(n=Func(F("pk"), function="COUNT")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


# What the database raises when it cut this session (idle in transaction too long: the
# worker was frozen; psycopg maps that to InternalError), cancelled a statement
# (statement_timeout), refused a lock in time (lock_timeout) or lost the connection.
# The attention loop treats them as a lost lease.
SESSION_LOST = (OperationalError, InterfaceError, InternalError)
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for NOWAIT and lock_timeout


def lock_conflict(exc: BaseException) -> bool:
    """A lock held by another session was not granted in time: PostgreSQL's
    lock_not_available (lock_timeout, NOWAIT), SQLite's "database is locked" (the
    busy timeout)."""
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) == LOCK_NOT_AVAILABLE or getattr(cause, "pgcode", None) == LOCK_NOT_AVAILABLE:
        return True
    return "database is locked" in str(exc)


# A web request whose statement gave up a lock wait (another session held the row past
# the lock timeout) is answered 503 with Retry-After, never a 500 (``retry_later``).
LOCK_BUSY_MESSAGE = "another change holds this record; try again in {seconds} s"


def lock_timed_out(exc: BaseException) -> bool:
    """Is ``exc`` a database error raised because a lock was not granted in time (the
    session's lock_timeout, NOWAIT, SQLite's busy timeout)? Any other error is not."""
    return isinstance(exc, OperationalError) and lock_conflict(exc)


def lock_retry_after() -> int:
    """The Retry-After, in whole seconds, of a lock wait given up: one lock timeout."""
    return max(1, -(-int(settings.DATABASE_LOCK_TIMEOUT_MS) // 1000))


def lock_busy_message() -> str:
    return LOCK_BUSY_MESSAGE.format(seconds=lock_retry_after())


# A request that could not reach the database (the server down or restarting, the
# connection cut under it) is answered 503 with Retry-After too: its transaction did not
# commit, so the same request can be sent again (unless the connection broke while the
# commit itself was under way: then nobody can know whether it took). PostgreSQL's
# connection errors: none of a statement's (no SQLSTATE: refused, cut, closed), class 08
# (connection exception), the server shutting down or starting (57P01-57P03).
UNAVAILABLE_MESSAGE = "the database cannot be reached; try again in {seconds} s"
UNAVAILABLE_RETRY_AFTER_S = 5  # about a restart's crash recovery
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")


def database_unreachable(exc: BaseException) -> bool:
    """Did ``exc`` come of a PostgreSQL connection that failed or was cut, rather than of
    a statement? (SQLite has no server to lose: its errors are the caller's or a 500.)"""
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    cause = exc.__cause__
    if cause is None or not type(cause).__module__.startswith("psycopg"):
        return False
    state = getattr(cause, "sqlstate", None)
    return state is None or str(state).startswith(_CONNECTION_STATES)


def on_a_live_connection(read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``read(*args, **kwargs)`` as the first statement of a hop after its caller was
    parked (a wait's read after its wake-up or its timeout): when the connection died
    meanwhile (the database restarted under the parked wait), it is closed and the read
    made once more on a new one; a database still down raises as before (a 503). Only
    for a read, outside a transaction: nothing half done is repeated."""
    try:
        return read(*args, **kwargs)
    except (OperationalError, InterfaceError) as exc:
        if not database_unreachable(exc) or connection.in_atomic_block:
            raise
    connection.close()
    return read(*args, **kwargs)


def read_while_waiting(down: T, read: Callable[..., T], *args: Any) -> T:
    """A wait's read once what its request did is stored (a chat's message): on a live
    connection (``on_a_live_connection``); with the database unreachable, ``down`` (as
    if nothing had come yet), so the wait goes on and ends as pending. A 503 would ask
    the caller to send again what is already stored."""
    try:
        return on_a_live_connection(read, *args)
    except (OperationalError, InterfaceError) as exc:
        if not database_unreachable(exc):
            raise
        return down


@dataclass(frozen=True)
class RetryLater:
    """A web request's database error that is not the request's fault: a 503 with
    ``Retry-After: seconds`` and ``{"detail": message, "code": code}``."""

    message: str
    seconds: int
    code: str


def retry_later(exc: BaseException) -> RetryLater | None:
    """The one rule of a request the database could not serve now (the API's exception
    handler, ``markus.core.api``, and the pages' middleware, ``markus.core.busy``, ask
    it): a lock not granted in time (``busy``), the database not reachable
    (``unavailable``); None for any other error."""
    if lock_timed_out(exc):
        return RetryLater(lock_busy_message(), lock_retry_after(), "busy")
    if database_unreachable(exc):
        return RetryLater(
            UNAVAILABLE_MESSAGE.format(seconds=UNAVAILABLE_RETRY_AFTER_S), UNAVAILABLE_RETRY_AFTER_S, "unavailable"
        )
    return None


def session_lock_timeout() -> bool:
    """Does this PostgreSQL connection's session start with ``DATABASE_LOCK_TIMEOUT_MS``
    as its lock_timeout (``-c lock_timeout=`` in its options, as the settings set it)?"""
    options = str(connection.settings_dict.get("OPTIONS", {}).get("options", ""))
    return f"lock_timeout={int(settings.DATABASE_LOCK_TIMEOUT_MS)}" in options.replace("-c ", "").split()


@contextmanager
def bounded_lock_wait() -> Iterator[None]:
    """A transaction in which every lock wait ends after ``DATABASE_LOCK_TIMEOUT_MS``
    (PostgreSQL: the session's lock_timeout, set as it starts, else ``SET LOCAL
    lock_timeout``; SQLite's one writer lock is bounded by its busy timeout). A lock not
    granted in time raises OperationalError (``lock_conflict``). Nested in a caller's
    transaction, the limit holds until that transaction ends."""
    with transaction.atomic():
        if connection.vendor == "postgresql" and not session_lock_timeout():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)", [f"{int(settings.DATABASE_LOCK_TIMEOUT_MS)}ms"]
                )
        yield


def make_prepared_cursor(conn: BaseDatabaseWrapper) -> CursorWrapper:
    """A new cursor of ``conn`` whose statements PostgreSQL plans once per connection: each
    is prepared on its first execution (server-side binding, ``prepare=True``) and executed
    by name after that. For a hot statement whose planning outweighs its execution (the
    run's take of its lease, the fenced claim: ``BENCHMARKS.md``, fourth pass;
    ``MARKUS_DB_PREPARE=false`` sends them unprepared). Django's wrapper is kept, so the
    query log, the counters and ``execute_wrapper`` see it as any other. One statement per
    ``execute`` (the extended protocol); the SQL must be one Django could send with
    server-side binding (``%s`` placeholders whose types PostgreSQL can infer). Other
    databases: the usual cursor. Callers take it kept per connection
    (``markus.core.statements.prepared_cursor``)."""
    if conn.vendor != "postgresql":
        return conn.cursor()
    conn.ensure_connection()
    conn.validate_thread_sharing()
    raw = _prepared_cursor_class()(conn.connection)
    return _PreparedDebugCursor(raw, conn) if conn.queries_logged else conn.make_cursor(raw)


_PLACEHOLDER = re.compile(r"%%|%s")


def fixed_values_written_in(
    conn: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, varying: Container[int]
) -> tuple[str, list[Any]]:
    """A compiled statement for ``make_prepared_cursor``: ``sql`` with the parameters that
    never change (a status, a kind, a flag) written in as SQL literals, and only those at
    ``varying`` (their indexes in ``params``) left as ``%s``; the SQL and those parameters,
    in order. PostgreSQL plans a prepared statement for each call's values five times, then
    keeps one generic plan if it costs no more: a fixed value sent as a parameter is unknown
    to that plan (no partial index matches it, no statistics estimate it), so the generic
    plan lost and every execution was planned anew, most of the statement's time. Other
    databases: unchanged."""
    if conn.vendor != "postgresql":
        return sql, list(params)
    values = iter(enumerate(params))
    kept: list[Any] = []
    ops: Any = conn.ops  # PostgreSQL's, which composes a value as psycopg would

    def one(placeholder: re.Match[str]) -> str:
        if placeholder.group() == "%%":
            return "%%"
        i, value = next(values)
        if i in varying:
            kept.append(value)
            return "%s"
        return str(ops.compose_sql("%s", [value])).replace("%", "%%")

    written = _PLACEHOLDER.sub(one, sql)
    if next(values, None) is not None:
        raise ValueError("more parameters than placeholders")
    return written, kept


class _PreparedDebugCursor(CursorDebugWrapper):
    """The query log's wrapper for a prepared statement: the statement logged as Django
    logs one under server-side binding (its SQL with the parameters composed in), since a
    statement executed by name leaves psycopg no query text to report."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return super(CursorDebugWrapper, self).execute(sql, params)


@cache
def _prepared_cursor_class() -> type:
    from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]
    from psycopg import errors, pq

    class PreparedCursor(ServerBindingCursor):
        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None) -> Any:
            try:
                return super().execute(query, params, prepare=prepare is not False, binary=binary)
            except errors.FeatureNotSupported:
                # "cached plan must not change result type": a migration changed a column
                # the statement returns since it was prepared on this connection. Outside a
                # transaction, forget the prepared statements (psycopg with them) and run it
                # anew; inside one, its ROLLBACK makes psycopg forget them for the next time.
                if prepare is False or self.connection.info.transaction_status != pq.TransactionStatus.IDLE:
                    raise
                super().execute("DEALLOCATE ALL", prepare=False)
                return super().execute(query, params, prepare=True, binary=binary)

    return PreparedCursor
