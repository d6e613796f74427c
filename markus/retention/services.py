"""Prune what the policy lets go (``selectors`` says what that is), in batches that keep
locks short, and record the run (``PruneRun``).

1. Dependents first, the items last: activity logs, activities, decisions, the tool-call
   journal, LLM sessions, then the items (so no cascade or SET NULL reaches a row the
   rules keep); then bus chunks, relayed outbox rows, audit rows.
2. Each batch is at most ``batch_size`` primary keys, read by the table's rule and
   deleted in its own transaction, the rule applied again inside it: a row that became
   needed since it was read (a cursor moved back, an item retried) stays.
3. A dry run counts each table's rule and deletes nothing; both are recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Model, QuerySet
from django.utils import timezone

from agentbus.models import AuditEvent, Chunk, OutboxRecord
from attention.models import AgentActivity, AgentActivityLog, AgentDecision, LLMSession, ToolCallRecord
from mailbox.models import MailboxItem

from . import selectors
from .models import PruneRun
from .policy import Policy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """One table: its model and the queryset of what may go under a policy at a time."""

    model: type[Model]
    rows: Callable[[Policy, datetime], QuerySet[Any]]

    @property
    def table(self) -> str:
        return str(self.model._meta.db_table)


def _cut(policy: Policy, now: datetime, days: float) -> datetime | None:
    return policy.cutoff(days, now)


STEPS: tuple[Step, ...] = (
    Step(
        AgentActivityLog,
        lambda p, now: selectors.activity_logs(_cut(p, now, p.items_days), _cut(p, now, p.activities_days)),
    ),
    Step(
        AgentActivity,
        lambda p, now: selectors.activities(_cut(p, now, p.items_days), _cut(p, now, p.activities_days)),
    ),
    Step(AgentDecision, lambda p, now: selectors.decisions(_cut(p, now, p.items_days))),
    Step(ToolCallRecord, lambda p, now: selectors.tool_calls(_cut(p, now, p.items_days))),
    Step(LLMSession, lambda p, now: selectors.sessions(_cut(p, now, p.items_days), _cut(p, now, p.sessions_days))),
    Step(MailboxItem, lambda p, now: selectors.items(_cut(p, now, p.items_days))),
    Step(Chunk, lambda p, now: selectors.chunks(_cut(p, now, p.chunks_days))),
    Step(OutboxRecord, lambda p, now: selectors.outbox(_cut(p, now, p.outbox_days))),
    Step(AuditEvent, lambda p, now: selectors.audit(_cut(p, now, p.audit_days))),
)
TABLES = tuple(step.table for step in STEPS)


@dataclass
class Outcome:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    batches: int = 0


def _delete_batches(step: Step, policy: Policy, now: datetime, outcome: Outcome) -> None:
    rows = step.rows(policy, now)
    while True:
        pks = list(rows.order_by("pk").values_list("pk", flat=True)[: policy.batch_size])
        if not pks:
            return
        with transaction.atomic():
            still = list(rows.filter(pk__in=pks).values_list("pk", flat=True))
            _, per_model = step.model._default_manager.filter(pk__in=still).delete()
        outcome.counts[step.table] += int(per_model.get(step.model._meta.label, 0))
        outcome.batches += 1
        if len(pks) < policy.batch_size:
            return


def prune(*, dry_run: bool = False, trigger: str = PruneRun.Trigger.COMMAND, policy: Policy | None = None) -> PruneRun:
    """Apply the retention policy (settings, unless ``policy`` is given) once; returns
    the recorded run, whose ``counts`` say per table what went (would go: ``dry_run``)."""
    policy = policy or Policy.from_settings()
    now = timezone.now()
    run = PruneRun.objects.create(started_at=now, trigger=trigger, dry_run=dry_run)
    outcome = Outcome()
    try:
        for step in STEPS:
            if dry_run:
                outcome.counts[step.table] = step.rows(policy, now).count()
            else:
                _delete_batches(step, policy, now, outcome)
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        run.counts, run.batches, run.finished_at = outcome.counts, outcome.batches, timezone.now()
        run.save(update_fields=["counts", "batches", "finished_at", "error"])
    log.info("retention %s: %s in %d batches", "dry run" if dry_run else "prune", outcome.counts, outcome.batches)
    return run
