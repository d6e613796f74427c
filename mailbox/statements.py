"""The mailbox's hot statements, made once per database connection
(``markus.core.statements``): the INSERT of a new
item, the claim of the head (or of one item) as one ``UPDATE … RETURNING``, and each
transition's conditional UPDATE; table and column names quoted for the connection, and
the converters the ORM would apply to a row it reads, so a returned row becomes a
``MailboxItem`` without another query; and the loop's two hot reads of the queue beside
its own (a prompt's listing of the head, the longest-queued items). ``mailbox.lifecycle``
runs the writes, ``mailbox.selectors`` the reads (and ``attention.queue_read`` makes
items of its own read's rows with ``item``); nothing else should.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import BaseDatabaseWrapper

from markus.core.statements import TableStatements, made_once

from .models import MailboxItem
from .registry import Status

FIELDS = tuple(MailboxItem._meta.concrete_fields)
ATTNAMES = tuple(f.attname for f in FIELDS)
ID_COLUMN = ATTNAMES.index("id")  # where a row of ``columns`` holds the item's id
FIELD = {**{f.name: f for f in FIELDS}, **{f.attname: f for f in FIELDS}}
# A new row: ``insert_queued`` sets these; every other column takes the model's default.
SET_BY_INSERT = frozenset({"id", "agent_id", "source_type", "priority", "payload", "metadata", "queued_at"})
DEFAULTED = tuple(f for f in FIELDS if f.attname not in SET_BY_INSERT)


class Statements(TableStatements[MailboxItem]):
    """The statements of one database connection, made once: table and column names
    quoted for it, and the converters the ORM would apply to a row it reads."""

    def __init__(self, conn: BaseDatabaseWrapper) -> None:
        qn = conn.ops.quote_name
        if not conn.features.can_return_columns_from_insert:
            # Every write of an item is one statement that returns the row it wrote.
            raise ImproperlyConfigured(
                f"the mailbox needs UPDATE … RETURNING: PostgreSQL, or SQLite 3.35 or newer ({conn.vendor})"
            )
        super().__init__(conn, MailboxItem)
        # The defaulted columns of a new row, as stored (a callable default is called per row).
        self.defaults: dict[str, tuple[Any, Any]] = {}
        for f in DEFAULTED:
            if not callable(f.default):
                value = f.get_default()
                self.defaults[f.attname] = (value, f.get_db_prep_save(value, conn))
        self.insert = self.insert_sql(1)  # every column: the item's id is its own, not the database's
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
        # ``claim`` as a CTE that runs only when the fence's CTE (``fenced_claim``) found
        # its row; the fence's result joined to it: no row means the fence did not hold.
        self.claim_after_fence = (
            f"claimed AS ({self.claim} AND EXISTS (SELECT 1 FROM fence) RETURNING {self.columns})"
            " SELECT claimed.* FROM fence LEFT JOIN claimed ON TRUE"
        )
        # The longest-queued items older than a time (``mailbox.selectors.queued_before``).
        self.queued_before = (
            f"SELECT {self.columns} FROM {self.table} WHERE {qn('agent_id')} = %s AND {queued_now}"
            f" AND {qn('queued_at')} < %s ORDER BY {qn('queued_at')}, {qn('id')} LIMIT %s"
        )
        self.update = f"UPDATE {self.table} SET "
        self.transitions: dict[tuple[tuple[str, ...], int, str | None, bool], str] = {}
        self.returning_sql = f" RETURNING {self.columns}"

    def transition(self, names: tuple[str, ...], statuses: int, fence: str | None, refund: bool) -> str:
        """The UPDATE of a transition of this shape (made once, then looked up)."""
        qn = self.conn.ops.quote_name
        sets = [f"{qn(self.field[name].column)} = %s" for name in names]
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

    def fenced_claim(self, fence: str) -> str:
        """The claim of one item (``claim``'s parameters after ``fence``'s) in one
        statement with ``fence``, an UPDATE of the attention row of a lease without its
        RETURNING (``attention.lease.fenced``; PostgreSQL): the item is claimed only when
        that UPDATE changed its row, which it locks first. One row when it did, the
        item's columns (all NULL when the item was not queued any more); none when not."""
        return f"WITH fence AS ({fence} RETURNING 1), {self.claim_after_fence}"

    def select(self, sql: str, params: Sequence[Any]) -> list[MailboxItem]:
        """Run a SELECT of ``columns``; its items."""
        cursor = self.cursor()
        cursor.execute(sql, params)
        return [self.item(row) for row in cursor.fetchall()]

    def fetch(self, sql: str, params: Sequence[Any]) -> MailboxItem | None:
        """Run an UPDATE with ``RETURNING`` the row; the item, or None if none matched."""
        cursor = self.cursor()
        cursor.execute(sql + self.returning_sql, params)
        rows = cursor.fetchall()
        return self.item(rows[0]) if rows else None


def statements() -> Statements:
    """The statements of this thread's connection."""
    return made_once(Statements)
