"""The per-agent fenced lease (ARCHITECTURE decision 2). The one place that takes,
renews and releases it.

Taking is one conditional UPDATE that also bumps ``lease_epoch``; the row count says
whether we won. Every later write about an item is fenced by that epoch, so a holder
that stalled past its expiry (GC pause, SIGSTOP, lost connection) and wakes up finds
its epoch gone and writes nothing.
"""

from __future__ import annotations

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
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from .models import AgentAttention, AttentionState


class StaleLease(Exception):
    """This worker's epoch is no longer current: stop and write nothing."""


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
    """Take the agent's lease if it is free or expired. None if someone holds it."""
    ensure_row(agent_id)
    now = timezone.now()
    owner = new_owner()
    won = (
        AgentAttention.objects.filter(agent_id=agent_id)
        .filter(Q(lease_owner="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .update(
            lease_owner=owner,
            lease_expires_at=now + timedelta(seconds=seconds or lease_seconds()),
            lease_epoch=F("lease_epoch") + 1,
            cancel_requested=False,
            updated_at=now,
        )
    )
    if won != 1:
        return None
    # The owner string is unique to this take, so this reads our own epoch.
    epoch = (
        AgentAttention.objects.filter(agent_id=agent_id, lease_owner=owner)
        .values_list("lease_epoch", flat=True)
        .first()
    )
    return None if epoch is None else Lease(agent_id, owner, epoch)


def lease_renew(lease: Lease, *, seconds: float | None = None) -> bool:
    """Extend the lease. Fails (False) once another worker has taken it; renewing an
    expired lease that nobody took is safe, the epoch proves it."""
    now = timezone.now()
    return (
        AgentAttention.objects.filter(agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner).update(
            lease_expires_at=now + timedelta(seconds=seconds or lease_seconds()), updated_at=now
        )
        == 1
    )


def lease_release(lease: Lease) -> bool:
    now = timezone.now()
    return (
        AgentAttention.objects.filter(agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner).update(
            lease_owner="",
            lease_expires_at=None,
            state=AttentionState.IDLE,
            current_item=None,
            focus_started_at=None,
            updated_at=now,
        )
        == 1
    )


_held = threading.local()


@contextmanager
def fenced(lease: Lease) -> Iterator[None]:
    """A transaction in which the lease is checked and held still: on PostgreSQL the
    attention row is locked (a successor's take waits for us, or we see its epoch); on
    SQLite the IMMEDIATE transaction already serialises writers. Raises StaleLease.

    Re-entrant: inside an open fenced block of the same lease, the check has been made
    and the lock is held, so nested writes join that transaction."""
    if getattr(_held, "lease", None) == lease:
        yield
        return
    with transaction.atomic():
        held = (
            AgentAttention.objects.select_for_update()
            .filter(agent_id=lease.agent_id, lease_epoch=lease.epoch, lease_owner=lease.owner)
            .exists()
        )
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
        from django.db import connection

        interval = max(0.05, lease_seconds() / 3)
        try:
            while not self._stop.wait(interval):
                if not lease_renew(self.lease):
                    self.lost = True
                    if self.on_lost:
                        self.on_lost()
                    return
        finally:
            connection.close()
