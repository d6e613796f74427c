"""The mailbox's hot statements, made once per database connection: the INSERT of a new
item, the claim of the head (or of one item) as one ``UPDATE … RETURNING``, and each
transition's conditional UPDATE; table and column names quoted for the connection, and
the converters the ORM would apply to a row it reads, so a returned row becomes a
``MailboxItem`` without another query. ``mailbox.lifecycle`` runs them; nothing else
should.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .models import MailboxItem
from .registry import Status

FIELDS = tuple(MailboxItem._meta.concrete_fields)
ATTNAMES = tuple(f.attname for f in FIELDS)
FIELD = {**{f.name: f for f in FIELDS}, **{f.attname: f for f in FIELDS}}
# A new row: ``insert_queued`` sets these; every other column takes the model's default.
SET_BY_INSERT = frozenset({"id", "agent_id", "source_type", "priority", "payload", "metadata", "queued_at"})
DEFAULTED = tuple(f for f in FIELDS if f.attname not in SET_BY_INSERT)
Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


class Statements:
    """The statements of one database connection, made once: table and column names
    quoted for it, and the converters the ORM would apply to a row it reads."""

    def __init__(self, conn: BaseDatabaseWrapper) -> None:
        qn = conn.ops.quote_name
        self.conn = conn
        if not conn.features.can_return_columns_from_insert:
            # Every write of an item is one statement that returns the row it wrote.
            raise ImproperlyConfigured(
                f"the mailbox needs UPDATE … RETURNING: PostgreSQL, or SQLite 3.35 or newer ({conn.vendor})"
            )
        self.utc_text = conn.vendor == "sqlite" and settings.USE_TZ and conn.timezone is UTC
        self._cursor: Any = None
        self._raw: Any = None
        self._logged = False
        self.table = qn(MailboxItem._meta.db_table)
        self.columns = ", ".join(qn(f.column) for f in FIELDS)
        # The defaulted columns of a new row, as stored (a callable default is called per row).
        self.defaults: dict[str, tuple[Any, Any]] = {}
        for f in DEFAULTED:
            if not callable(f.default):
                value = f.get_default()
                self.defaults[f.attname] = (value, f.get_db_prep_save(value, conn))
        self.converters: list[tuple[int, list[tuple[Converter, Any]]]] = []
        for i, f in enumerate(FIELDS):
            col = f.get_col(MailboxItem._meta.db_table)
            found = [*conn.ops.get_db_converters(col), *col.get_db_converters(conn)]
            if found:
                self.converters.append((i, [(fn, col) for fn in found]))
        self.insert = f"INSERT INTO {self.table} ({self.columns}) VALUES ({', '.join(['%s'] * len(FIELDS))})"
        claim_set = (
            # The first start is kept: a resumed item (preempted, paused, parked) started before.
            f"UPDATE {self.table} SET {qn('status')} = '{Status.PROCESSING.value}',"
            f" {qn('started_at')} = COALESCE({qn('started_at')}, %s),"
            f" {qn('lease_epoch')} = %s, {qn('attempts')} = {qn('attempts')} + 1"
        )
        lock = " FOR UPDATE" if conn.vendor == "postgresql" else ""
        # The head of the queue by the partial index (agent, priority, queued_at, id)
        # WHERE status = 'queued': the literal lets the planner pick it on both databases.
        head = (
            f"SELECT head.{qn('id')} FROM {self.table} head WHERE head.{qn('agent_id')} = %s"
            f" AND head.{qn('status')} = '{Status.QUEUED.value}'"
            f" ORDER BY head.{qn('priority')}, head.{qn('queued_at')}, head.{qn('id')} LIMIT 1{lock}"
        )
        queued_now = f"{qn('status')} = '{Status.QUEUED.value}'"
        self.claim_next = f"{claim_set} WHERE {qn('id')} = ({head}) AND {queued_now}"
        self.claim = f"{claim_set} WHERE {qn('id')} = %s AND {queued_now}"
        self.update = f"UPDATE {self.table} SET "
        self.transitions: dict[tuple[tuple[str, ...], int, str | None, bool], str] = {}
        self.returning_sql = f" RETURNING {self.columns}"

    def transition(self, names: tuple[str, ...], statuses: int, fence: str | None, refund: bool) -> str:
        """The UPDATE of a transition of this shape (made once, then looked up)."""
        qn = self.conn.ops.quote_name
        sets = [f"{qn(FIELD[name].column)} = %s" for name in names]
        if refund:
            attempts = qn("attempts")
            sets.append(f"{attempts} = CASE WHEN {attempts} > 0 THEN {attempts} - 1 ELSE 0 END")
        where = f"{qn('id')} = %s AND {qn('status')} IN ({', '.join(['%s'] * statuses)})"
        if fence == "null":
            where += f" AND {qn('lease_epoch')} IS NULL"
        elif fence == "epoch":
            where += f" AND {qn('lease_epoch')} = %s"
        made = self.transitions[(names, statuses, fence, refund)] = f"{self.update}{', '.join(sets)} WHERE {where}"
        return made

    def stamp(self, value: datetime) -> Any:
        """A datetime as the database stores it (``adapt_datetimefield_value``, with a
        shortcut for the usual case: an aware UTC time and a connection in UTC)."""
        if self.utc_text and value.tzinfo is UTC:
            return str(value.replace(tzinfo=None))
        return self.conn.ops.adapt_datetimefield_value(value)

    def prep(self, f: Any, value: Any) -> Any:
        if isinstance(value, datetime):
            return self.stamp(value)
        return f.get_db_prep_save(value, self.conn)

    def cursor(self) -> Any:
        """This connection's cursor, kept while the connection and the query logging
        mode stay the same (a new connection, or a test capturing queries, gets a new
        one). Statements run on it are read to the end, so none stays open."""
        conn = self.conn
        logged = conn.queries_logged
        raw = conn.connection
        if self._cursor is None or raw is None or raw is not self._raw or logged != self._logged:
            self._cursor = conn.cursor()
            self._raw, self._logged = conn.connection, logged
        return self._cursor

    def item(self, values: Sequence[Any]) -> MailboxItem:
        """The model instance of a row of ``columns``, converted as the ORM converts."""
        row = list(values)
        conn = self.conn
        for i, converters in self.converters:
            value = row[i]
            for fn, col in converters:
                value = fn(value, col, conn)
            row[i] = value
        return MailboxItem.from_db(conn.alias, ATTNAMES, row)

    def fetch(self, sql: str, params: Sequence[Any]) -> MailboxItem | None:
        """Run an UPDATE with ``RETURNING`` the row; the item, or None if none matched."""
        cursor = self.cursor()
        cursor.execute(sql + self.returning_sql, params)
        rows = cursor.fetchall()
        return self.item(rows[0]) if rows else None


_statements: weakref.WeakKeyDictionary[BaseDatabaseWrapper, Statements] = weakref.WeakKeyDictionary()


def statements() -> Statements:
    """The statements of this thread's connection."""
    conn = connections[DEFAULT_DB_ALIAS]
    try:
        return _statements[conn]
    except KeyError:
        made = _statements[conn] = Statements(conn)
        return made
