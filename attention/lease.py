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
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Self

from django.conf import settings
from django.db import InterfaceError, InternalError, OperationalError, connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from .models import AgentAttention, AttentionState

log = logging.getLogger(__name__)

# What the database raises when it cut this session (idle in transaction too long: the
# worker was frozen; psycopg maps that to InternalError), cancelled a statement
# (statement_timeout), refused a lock in time (lock_timeout) or lost the connection.
# The loop treats them as a lost lease.
SESSION_LOST = (OperationalError, InterfaceError, InternalError)
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for NOWAIT and lock_timeout


class StaleLease(Exception):
    """This worker's epoch is no longer current: stop and write nothing."""


class LeaseBusy(StaleLease):
    """The agent's attention row stayed locked by another session past the lock timeout
    (a holder frozen mid-transaction): give the run up and write nothing."""


def lock_conflict(exc: BaseException) -> bool:
    """A lock held by another session was not granted in time: PostgreSQL's
    lock_not_available (lock_timeout, NOWAIT), SQLite's "database is locked" (the
    busy timeout)."""
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) == LOCK_NOT_AVAILABLE or getattr(cause, "pgcode", None) == LOCK_NOT_AVAILABLE:
        return True
    return "database is locked" in str(exc)


@contextmanager
def bounded_lock_wait() -> Iterator[None]:
    """A transaction in which every lock wait ends after ``DATABASE_LOCK_TIMEOUT_MS``
    (PostgreSQL: ``SET LOCAL lock_timeout``; SQLite's one writer lock is bounded by its
    busy timeout). A lock not granted in time raises OperationalError (``lock_conflict``).
    Nested in a caller's transaction, the limit holds until that transaction ends."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)", [f"{int(settings.DATABASE_LOCK_TIMEOUT_MS)}ms"]
                )
        yield


@dataclass(frozen=True)
class Lease:
    agent_id: str
    owner: str
    epoch: int

    def fence(self) -> Q:
        """A condition on MailboxItem rows: the agent's lease is still this one."""
        return Q(
            Exists(
                AgentAttention.objects.filter(
                    agent_id=OuterRef("agent_id"), lease_epoch=self.epoch, lease_owner=self.owner
                )
            )
        )


def lease_seconds() -> float:
    return float(settings.MARKUS["LEASE_SECONDS"])


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


def ensure_row(agent_id: str) -> None:
    AgentAttention.objects.get_or_create(agent_id=agent_id)


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
    return Lease(agent_id, owner, epoch + 1) if won == 1 else None


def lease_renew(lease: Lease, *, seconds: float | None = None) -> bool:
    """Extend the lease. Fails (False) once another worker has taken it; renewing an
    expired lease that nobody took is safe, the epoch proves it. Also False when another
    session keeps the row locked past the lock timeout: the lease is not proven."""
    now = timezone.now()
    try:
        with bounded_lock_wait():
            return (
                AgentAttention.objects.filter(
                    agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner
                ).update(lease_expires_at=now + timedelta(seconds=seconds or lease_seconds()), updated_at=now)
                == 1
            )
    except OperationalError as exc:
        if lock_conflict(exc):
            return False
        raise


def lease_release(lease: Lease) -> bool:
    """Let go of the lease (False if it was no longer ours, or its row stayed locked by
    another session past the lock timeout: then it simply runs out)."""
    now = timezone.now()
    try:
        with bounded_lock_wait():
            return (
                AgentAttention.objects.filter(
                    agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner
                ).update(
                    lease_owner="",
                    lease_expires_at=None,
                    state=AttentionState.IDLE,
                    current_item=None,
                    focus_started_at=None,
                    updated_at=now,
                )
                == 1
            )
    except OperationalError as exc:
        if lock_conflict(exc):
            return False
        raise


_held = threading.local()


@contextmanager
def fenced(lease: Lease) -> Iterator[None]:
    """A transaction in which the lease is checked and held still: on PostgreSQL the
    attention row is locked (a successor's take skips it and answers busy, or we see its
    epoch); on SQLite the IMMEDIATE transaction already serialises writers. Raises
    StaleLease, or LeaseBusy when another session keeps the row locked past the lock
    timeout. Every lock wait inside is bounded the same way (``bounded_lock_wait``).

    Keep the block short: no provider call inside (a frozen or slow holder keeps its
    agent's row locked, and PostgreSQL cuts a transaction left idle).

    Re-entrant: inside an open fenced block of the same lease, the check has been made
    and the lock is held, so nested writes join that transaction."""
    if getattr(_held, "lease", None) == lease:
        yield
        return
    with bounded_lock_wait():
        try:
            held = (
                AgentAttention.objects.select_for_update()
                .filter(agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner)
                .exists()
            )
        except OperationalError as exc:
            if lock_conflict(exc):
                raise LeaseBusy(f"the attention row of {lease.agent_id} is locked by another session") from exc
            raise
        if not held:
            raise StaleLease(f"lease epoch {lease.epoch} of {lease.agent_id} is no longer current")
        _held.lease = lease
        try:
            yield
        finally:
            _held.lease = None


class LeaseKeeper:
    """Renews the lease in the background while an LLM call is in flight. A frozen
    process freezes its keeper too, so fencing, not the keeper, is what keeps a stale
    worker harmless."""

    def __init__(self, lease: Lease, on_lost: Callable[[], object] | None = None) -> None:
        self.lease = lease
        self.on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.agent_id}", daemon=True)
        self.lost = False

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        interval = max(0.05, lease_seconds() / 3)
        try:
            while not self._stop.wait(interval):
                if not lease_renew(self.lease):
                    self.lost = True
                    if self.on_lost:
                        self.on_lost()
                    return
        except SESSION_LOST:  # the holder's own renew after the call decides
            log.warning("lease keeper of %s stopped on a database error", self.lease.agent_id, exc_info=True)
        finally:
            connection.close()
