"""The beat job (``attention.schedules`` declares its entry, ``retention.prune``)."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from .models import PruneRun
from .policy import Policy
from .services import prune

PRUNE_TASK = "retention.prune"


def beat_prune() -> int:
    """Prune by the policy in settings (nothing when ``RETENTION["ENABLED"]`` is off);
    returns the rows removed."""
    policy = Policy.from_settings()
    if not policy.enabled:
        return 0
    return prune(trigger=PruneRun.Trigger.BEAT, policy=policy).total


@shared_task(name=PRUNE_TASK, ignore_result=True)
def prune_job() -> int:
    close_old_connections()
    try:
        return beat_prune()
    finally:
        close_old_connections()
