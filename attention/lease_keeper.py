"""Keeping a lease alive while an LLM call or a tool outside the database is in flight:
``LeaseKeeper`` renews it in the background (``attention.lease``) at a third of its
length. A frozen process freezes its keeper too, so fencing, not the keeper, is what
keeps a stale worker harmless."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Self

from django.db import connection

from markus.core.db import SESSION_LOST

from .lease import Lease, lease_renew, lease_seconds

log = logging.getLogger(__name__)


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
