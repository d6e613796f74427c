"""The run's take of the agent's lease (``lease_take_for_run``): one statement that takes
the lease (``attention.lease``'s rule: only a running internal agent's, only when free or
expired, the epoch bumped) and reads what the run needs first: whether items are still
``processing`` (a dead worker's), the state the previous holder left, the agent's name, role
and main session, whether a budget holds it, and on PostgreSQL the loop's first queue read.
``attention.lease`` keeps the lease's other ways (take, take over, renew, release, fence)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import OperationalError, connection
from django.db.models import Q
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent, ChatSession
from markus.core.db import lock_conflict
from markus.core.statements import prepared_cursor
from markus.usage import budgets

from .lease import Lease, ensure_row, lease_seconds, new_owner, note_renewed
from .models import AgentAttention, AttentionState


@dataclass(frozen=True)
class Take:
    """What taking the lease for a run found: the lease (None: ``status`` says why, busy
    or inactive) and whether items are still ``processing`` (a dead worker's)."""

    lease: Lease | None
    status: str = ""
    in_flight: bool = False
    # Busy only because the row was locked (or SQLite's writer lock held) while the
    # lease itself was free or expired: a holder frozen inside a transaction. Nobody
    # will look again when it lets go, so the caller should.
    locked: bool = False
    # Read by the same statement, so the run need not read them again: the agent's
    # name and role, and its main chat session ("" if it has none yet).
    agent_name: str = ""
    agent_role: str = ""
    main_session_id: str = ""
    # The rows of the read the caller joined to the take (``with_read``), its columns
    # only; None when none was joined, the queue was empty, or the run recovers first
    # (a recovery changes the queue: the run reads it afterwards).
    read: list[tuple[Any, ...]] | None = None
    # The attention state the previous holder left: not idle, it never let go (it died
    # or lost the lease mid-run, perhaps deliberating, with nothing in flight, or its
    # release failed). The run then closes what it left open (``loop._recover``).
    abandoned: bool = False


def _take_sql(vendor: str, budgeted: str = "TRUE") -> str:
    att = AgentAttention._meta.db_table
    agents = Agent._meta.db_table
    items = MailboxItem._meta.db_table
    sessions = ChatSession._meta.db_table
    free = "(lease_owner = '' OR lease_expires_at IS NULL OR lease_expires_at < %s)"
    # PostgreSQL: a row locked by someone else (a holder frozen inside a fenced
    # transaction) counts as held: SKIP LOCKED, never a wait. SQLite has no row locks;
    # the statement takes the one writer lock (busy timeout, then "database is locked").
    target = (
        f"(SELECT agent_id FROM {att} WHERE agent_id = %s AND {free} FOR UPDATE SKIP LOCKED)"
        if vendor == "postgresql"
        else "%s"
    )
    # Its fixed values are written in, not sent: PostgreSQL plans the prepared take once
    # only when it knows them (``markus.core.db.fixed_values_written_in``).
    return (
        f"UPDATE {att} SET lease_owner = %s, lease_expires_at = %s, lease_epoch = lease_epoch + 1,"
        f" cancel_requested = FALSE, updated_at = %s"
        f" WHERE agent_id = {target} AND {free}"
        f" AND EXISTS (SELECT 1 FROM {agents} WHERE id = %s"
        f" AND kind = '{Agent.RUNS['kind']}' AND status = '{Agent.RUNS['status']}')"
        f" RETURNING lease_epoch,"
        f" EXISTS (SELECT 1 FROM {items} WHERE agent_id = %s AND status = '{Status.PROCESSING.value}'),"
        f" (SELECT name FROM {agents} WHERE id = %s), (SELECT role FROM {agents} WHERE id = %s),"
        f" (SELECT id FROM {sessions} WHERE agent_id = %s AND is_main = TRUE),"
        f" state,"  # not written by the take: the state the previous holder left
        f" {budgeted}"  # whether a budget holds the agent (``budgets.held_sql``)
        # PostgreSQL: the take's commit is not waited for on disk (see the caller), set for
        # its own transaction by the row it took (no row taken, nothing to commit).
        + (", set_config('synchronous_commit', 'off', true)" if vendor == "postgresql" else "")
    )


# The take's columns, as ``_take_sql`` returns them (``unflushed`` on PostgreSQL only).
_TAKE_COLUMNS = ("epoch", "in_flight", "agent_name", "agent_role", "main_session", "state", "budgeted", "unflushed")


def lease_take_for_run(agent_id: str, *, with_read: tuple[str, list[Any]] | None = None) -> Take:
    """Take the agent's lease for a run of the loop, in one statement: only if the agent
    is a running internal agent and the lease is free or expired; it also tells whether
    items are still ``processing`` (their worker died), whether the previous holder
    left without letting go (``abandoned``: its state is not idle) and whether a budget
    holds the agent (``Lease.budgeted``). Busy if someone holds the lease (or keeps its
    row locked); inactive if the agent is not running. ``with_read``: a read's SQL and
    parameters (the loop's queue read) sent in the same statement on PostgreSQL, its
    rows in ``Take.read``."""
    now = timezone.now()
    owner = new_owner()
    ops = connection.ops
    when = ops.adapt_datetimefield_value(now)
    expires = ops.adapt_datetimefield_value(now + timedelta(seconds=lease_seconds()))
    target = [agent_id, when] if connection.vendor == "postgresql" else [agent_id]
    held, held_params = budgets.held_sql(agent_id)
    params = [owner, expires, when, *target, when, agent_id, agent_id, agent_id, agent_id, agent_id, *held_params]
    # On PostgreSQL its commit is not waited for on disk (``synchronous_commit`` off for
    # this statement's own transaction): the run's next durable commit (the claim) flushes
    # it with its own, and a crash before that loses the take with the run's writes, nothing
    # else (both held on a crashed server: tests/faults/test_database_crash_and_the_take.py).
    sql = _take_sql(connection.vendor, held)
    if connection.vendor == "postgresql" and with_read is not None:
        # The caller's read in the same statement (one round trip less on the way from a
        # wake-up to the claim): the take as a CTE, the read joined to its row. SQLite has
        # no UPDATE in a CTE; a statement there costs no round trip.
        read, read_params = with_read
        took = ", ".join(_TAKE_COLUMNS)
        sql = f"WITH took({took}) AS ({sql}) SELECT * FROM took LEFT JOIN LATERAL ({read}) q ON TRUE"
        params += read_params
    for attempt in range(2):
        try:
            # Prepared on PostgreSQL: planning it was most of its time, after every wake-up.
            cursor = prepared_cursor()
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        except OperationalError as exc:
            if lock_conflict(exc):  # SQLite: a writer held the database past the busy timeout
                return Take(None, "busy", locked=True)
            raise
        if rows:
            row = rows[0]
            lease = Lease(agent_id, owner, int(row[0]), budgeted=bool(row[6]))
            note_renewed(lease)
            in_flight = bool(row[1])
            abandoned = (row[5] or AttentionState.IDLE) != AttentionState.IDLE
            n = len(_TAKE_COLUMNS)
            joined = len(row) > n and row[n] is not None and not (in_flight or abandoned)
            return Take(
                lease,
                in_flight=in_flight,
                agent_name=row[2] or "",
                agent_role=row[3] or "",
                main_session_id=row[4] or "",
                abandoned=abandoned,
                read=[r[n:] for r in rows] if joined else None,
            )
        if not Agent.objects.running().filter(id=agent_id).exists():
            return Take(None, "inactive")
        row_of_agent = AgentAttention.objects.filter(agent_id=agent_id)
        if attempt or row_of_agent.exists():
            free = Q(lease_owner="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=timezone.now())
            return Take(None, "busy", locked=row_of_agent.filter(free).exists())
        ensure_row(agent_id)  # the agent's first run
    return Take(None, "busy")
