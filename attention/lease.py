"""The per-agent fenced lease (ARCHITECTURE decision 2). The one place that takes,
renews and releases it.

Taking is one conditional UPDATE that also bumps ``lease_epoch``; the row count says
whether we won. Every later write about an item is fenced by that epoch, so a holder
that stalled past its expiry (GC pause, SIGSTOP, lost connection) and wakes up finds
its epoch gone and writes nothing.

A frozen holder stalls only its own agent (decision 11). A holder frozen inside a
fenced transaction keeps the attention row locked until PostgreSQL cuts its session
(``idle_in_transaction_session_timeout``, see settings). Nothing here waits for that
lock without limit: the take skips a locked row (SKIP LOCKED) and answers busy, the
sweep comes back later; renew, release and ``fenced`` wait at most
``DATABASE_LOCK_TIMEOUT_MS`` (``SET LOCAL lock_timeout``) and then give up (not
renewed, not released, ``LeaseBusy``). On SQLite the database has one writer: a
transaction held by a frozen thread blocks every writer for up to the busy timeout, and
the take then answers busy instead of raising.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, models, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from markus.agents.models import Agent
from markus.core.db import bounded_lock_wait, lock_conflict

from .models import AgentAttention, AttentionState

log = logging.getLogger(__name__)


class StaleLease(Exception):
    """This worker's epoch is no longer current: stop and write nothing."""


class LeaseBusy(StaleLease):
    """The agent's attention row stayed locked by another session past the lock timeout
    (a holder frozen mid-transaction): give the run up and write nothing."""


@dataclass(frozen=True)
class Lease:
    agent_id: str
    owner: str
    epoch: int
    # False: the take found that no budget holds the agent, so its run reads none
    # (``attention.metering``; a budget set meanwhile counts from the next run).
    budgeted: bool = field(default=True, compare=False)


def lease_seconds() -> float:
    return float(settings.MARKUS["LEASE_SECONDS"])


def _this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:"


def new_owner() -> str:
    return f"{_this_process()}{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


def leases_end_with_this_process() -> int:
    """The leases this process holds, run out now: it is ending with runs still in flight
    (``manage.py up`` past its shutdown grace), so the next run that takes one recovers its
    item at once instead of after the lease. Their epochs stand: a write of this process's
    runs after this matches nothing. How many it ran out."""
    return AgentAttention.objects.filter(lease_owner__startswith=_this_process()).update(
        lease_expires_at=timezone.now()
    )


def ensure_row(agent_id: str) -> None:
    AgentAttention.objects.get_or_create(agent_id=agent_id)


# When each lease this process holds was last proven and extended (monotonic seconds),
# so renewals happen when due (a third of the lease gone) rather than at every step.
_renewed: dict[tuple[str, str, int], float] = {}
_renewed_lock = threading.Lock()


def _key(lease: Lease) -> tuple[str, str, int]:
    return (lease.agent_id, lease.owner, lease.epoch)


def note_renewed(lease: Lease) -> None:
    with _renewed_lock:
        if len(_renewed) > 1000:  # leases of runs that ended without a release
            _renewed.clear()
        _renewed[_key(lease)] = time.monotonic()


def renewal_due(lease: Lease) -> bool:
    """A third of the lease has passed since it was last extended (or it never was)."""
    last = _renewed.get(_key(lease))
    return last is None or time.monotonic() - last >= lease_seconds() / 3


def _forget(lease: Lease) -> None:
    with _renewed_lock:
        _renewed.pop(_key(lease), None)


def abandoned_leases(now: datetime) -> QuerySet[AgentAttention]:
    """Leases that ran out without a release, their state not idle: a worker died or
    froze mid-run. The sweep kicks such a running agent (its next run recovers) and tidies
    up itself for one that is not running (``loop.tidy_after_dead_workers``)."""
    return (
        AgentAttention.objects.filter(lease_expires_at__lte=now)
        .exclude(lease_owner="")
        .exclude(state=AttentionState.IDLE)
    )


def lease_take(agent_id: str, *, seconds: float | None = None) -> Lease | None:
    """Take the agent's lease if it is free or expired. None ("busy") if someone holds
    it, and also while another session keeps its row locked (a holder frozen inside a
    fenced transaction): the take never waits for that lock."""
    now = timezone.now()
    owner = new_owner()
    try:
        ensure_row(agent_id)
        with transaction.atomic():
            # SKIP LOCKED: a row locked by someone else counts as held (PostgreSQL; SQLite
            # has no row locks, its IMMEDIATE transaction already serialises writers).
            epoch = (
                AgentAttention.objects.select_for_update(skip_locked=True)
                .filter(agent_id=agent_id)
                .filter(Q(lease_owner="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
                .values_list("lease_epoch", flat=True)
                .first()
            )
            if epoch is None:
                return None
            won = AgentAttention.objects.filter(agent_id=agent_id, lease_epoch=epoch).update(
                lease_owner=owner,
                lease_expires_at=now + timedelta(seconds=seconds or lease_seconds()),
                lease_epoch=epoch + 1,
                cancel_requested=False,
                updated_at=now,
            )
    except OperationalError as exc:
        if lock_conflict(exc):  # SQLite: a writer held the database past the busy timeout
            return None
        raise
    if won != 1:
        return None
    lease = Lease(agent_id, owner, epoch + 1)
    note_renewed(lease)
    return lease


def lease_take_over(agent_id: str, *, epoch: int) -> Lease | None:
    """Take the agent's lease from a live holder still at ``epoch`` (the sweep's time
    limit: a holder that kept one item past it, ``attention.time_limit``). The epoch
    moves on, so the holder, should it wake, writes nothing (fencing); its lease keeper's
    next renewal fails. None when the lease moved on meanwhile or its row is locked."""
    now = timezone.now()
    lease = Lease(agent_id, new_owner(), epoch + 1)
    taken = _update_if(
        AgentAttention.objects.filter(agent_id=agent_id, lease_epoch=epoch),
        lease_owner=lease.owner,
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
        lease_epoch=lease.epoch,
        cancel_requested=False,
        updated_at=now,
    )
    if not taken:
        return None
    note_renewed(lease)
    return lease


def lease_renew(lease: Lease, *, seconds: float | None = None) -> bool:
    """Extend the lease. Fails (False) once another worker has taken it; renewing an
    expired lease that nobody took is safe, the epoch proves it. Also False when another
    session keeps the row locked past the lock timeout: the lease is not proven."""
    now = timezone.now()
    renewed = _update_if(
        _mine(lease), lease_expires_at=now + timedelta(seconds=seconds or lease_seconds()), updated_at=now
    )
    if renewed:
        note_renewed(lease)
    return renewed


def lease_renew_if_due(lease: Lease) -> bool:
    """Renew only when a third of the lease has passed since it was last extended;
    between renewals the fenced writes prove the lease. False once it was lost."""
    return lease_renew(lease) if renewal_due(lease) else True


def lease_release(lease: Lease) -> bool | None:
    """Let go of the lease, its state back to idle. True: the run was in another state (it
    had work in focus, or was deciding), so the change is worth announcing; False: it was
    idle already (a run that found nothing). None: it was no longer ours, or its row
    stayed locked by another session past the lock timeout: then it simply runs out."""
    _forget(lease)
    fields = {
        "lease_owner": "",
        "lease_expires_at": None,
        "state": AttentionState.IDLE,
        "current_item": None,
        "focus_started_at": None,
        "updated_at": timezone.now(),
    }
    try:
        with bounded_lock_wait():
            if _mine(lease).exclude(state=AttentionState.IDLE).update(**fields):
                return True
            return False if _mine(lease).update(**fields) else None
    except OperationalError as exc:
        if lock_conflict(exc):
            return None
        raise


def _update_if(row: QuerySet[AgentAttention], **fields: Any) -> bool:
    """Write ``fields`` on the attention row ``row`` finds (the lease's: ``_mine``), if it
    still finds it; False if not, or if another session kept the row locked past the
    lock timeout."""
    try:
        with bounded_lock_wait():
            return row.update(**fields) == 1
    except OperationalError as exc:
        if lock_conflict(exc):
            return False
        raise


class AgentNotRunning(Exception):
    """The lease is ours but the agent was stopped or paused: begin nothing new."""


class Fence:
    """An open fenced transaction of one lease: the proof the loop's writers take.

    A phase of the loop (begin an item, a turn's tool call, a yield point's decision,
    settle, recover, a deliberation's start and end) opens one with ``fenced`` and hands
    it to every writer of that phase; a writer takes it and never opens a transaction of
    its own, so which writes share a transaction is read in the phase's code."""

    __slots__ = ("_open", "claimed", "lease")

    def __init__(self, lease: Lease, claimed: MailboxItem | None = None) -> None:
        self.lease = lease
        self.claimed = claimed  # the item ``fenced(claim=…)`` claimed
        self._open = True

    @property
    def agent_id(self) -> str:
        return self.lease.agent_id

    @property
    def epoch(self) -> int:
        return self.lease.epoch

    def check(self) -> None:
        """A writer was handed a fence whose transaction has ended: a bug, not a fault."""
        if not self._open:
            raise RuntimeError(f"the fenced transaction of {self.lease.agent_id} has ended")


@contextmanager
def fenced(lease: Lease, *, running: bool = False, claim: str | None = None, **attention: Any) -> Iterator[Fence]:
    """Open the fenced transaction of a phase: the lease is checked and held still (on
    PostgreSQL the attention row is locked: a successor's take skips it and answers
    busy, or we see its epoch; on SQLite the IMMEDIATE transaction already serialises
    writers). Yields the ``Fence`` the phase hands to its writers. Raises StaleLease, or
    LeaseBusy when another session keeps the row locked past the lock timeout. Every
    lock wait inside is bounded the same way (``bounded_lock_wait``).

    The check is one statement. With ``attention`` fields (the attention state the
    phase begins with) it is the UPDATE that writes them, and when a renewal is due it
    also extends the lease; otherwise it is a ``SELECT … FOR UPDATE``. ``running``: the
    agent must also still be running, or AgentNotRunning is raised (nothing written).
    ``claim``: an item to claim once the check holds (``Fence.claimed``: the item, None
    when it was not queued any more); on PostgreSQL the claim goes in the check's own
    statement (``mailbox.lifecycle.claim_fenced``: one round trip, the attention row
    locked first as before), so a holder the check refuses claims nothing either way.

    Keep the block short: no provider call inside (a frozen or slow holder keeps its
    agent's row locked, and PostgreSQL cuts a transaction left idle). A writer never
    opens one: it takes the phase's ``Fence``."""
    claimed: MailboxItem | None = None
    with bounded_lock_wait():
        now = timezone.now()
        renew = renewal_due(lease)
        try:
            if attention or renew or running:
                fields = dict(attention)
                if renew:
                    fields["lease_expires_at"] = now + timedelta(seconds=lease_seconds())
                fields.setdefault("updated_at", now)
                update, params = _update_mine_sql(lease, fields, running=running)
                if claim is not None and connection.vendor == "postgresql":
                    held, claimed = lifecycle.claim_fenced(claim, epoch=lease.epoch, fence=(update, params))
                else:
                    with connection.cursor() as cursor:
                        cursor.execute(update, params)
                        held = cursor.rowcount == 1
                    if held and claim is not None:  # SQLite: its writer lock is held already
                        claimed = lifecycle.claim(claim, epoch=lease.epoch)
                if not held and running and _mine(lease).exists():
                    raise AgentNotRunning(lease.agent_id)
            else:
                held = _check_mine(lease)
        except OperationalError as exc:
            if lock_conflict(exc) and not _item_lock(exc):
                raise LeaseBusy(f"the attention row of {lease.agent_id} is locked by another session") from exc
            raise  # the item's row was (a claim in the block's body raised it as it is)
        if not held:
            raise StaleLease(f"lease epoch {lease.epoch} of {lease.agent_id} is no longer current")
        if renew:
            # Counted from the transaction that extended it; should it roll back, the
            # lease still had two thirds of its time and the next block renews it.
            note_renewed(lease)
        tx = Fence(lease, claimed)
        try:
            yield tx
        finally:
            tx._open = False


# The fence's statements run for every transaction of the loop: written here as SQL
# (the ORM built each anew at several times the database's cost).


def _check_mine(lease: Lease) -> bool:
    """The lease is still this one; on PostgreSQL its row is locked until the
    transaction ends (SQLite's IMMEDIATE transaction already holds the writer lock)."""
    lock = " FOR UPDATE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {AgentAttention._meta.db_table}"
            f" WHERE agent_id = %s AND lease_epoch = %s AND lease_owner = %s{lock}",
            [lease.agent_id, lease.epoch, lease.owner],
        )
        return cursor.fetchone() is not None


def _item_lock(exc: OperationalError) -> bool:
    """Was the lock not granted in time an item's row (the claim sent with the check),
    not the attention row? PostgreSQL names the relation in the error's context."""
    diag = getattr(exc.__cause__, "diag", None)
    return f'relation "{MailboxItem._meta.db_table}"' in str(getattr(diag, "context", "") or "")


def _update_mine_sql(lease: Lease, fields: dict[str, Any], *, running: bool = False) -> tuple[str, list[Any]]:
    """The UPDATE of the attention row of this lease (fenced by epoch and owner); with
    ``running`` only while the agent is a running internal agent. SQL and parameters."""
    meta, qn = AgentAttention._meta, connection.ops.quote_name
    sets, params = [], []
    for name, value in fields.items():
        f = meta.get_field(name)
        assert isinstance(f, models.Field)
        if isinstance(value, models.Model):
            value = value.pk
        sets.append(f"{qn(str(f.column))} = %s")
        params.append(f.get_db_prep_save(value, connection) if value is not None else None)
    sql = (
        f"UPDATE {qn(meta.db_table)} SET {', '.join(sets)}"
        " WHERE agent_id = %s AND lease_epoch = %s AND lease_owner = %s"
    )
    params += [lease.agent_id, lease.epoch, lease.owner]
    if running:
        sql += f" AND EXISTS (SELECT 1 FROM {qn(Agent._meta.db_table)} WHERE id = %s AND kind = %s AND status = %s)"
        params += [lease.agent_id, Agent.RUNS["kind"], Agent.RUNS["status"]]
    return sql, params


def _mine(lease: Lease) -> QuerySet[AgentAttention]:
    return AgentAttention.objects.filter(agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner)
