"""Prune what the policy lets go (``selectors`` says what that is), in batches that keep
locks short, and record the run (``PruneRun``).

1. Items by batches of ``batch_size``: the item rule is read once per batch; the batch's
   activity logs, activities, decisions, tool-call journal and LLM sessions go first
   (each in batches of at most ``batch_size`` rows), then the items themselves, so no
   cascade or SET NULL reaches a row the rules keep. The items' delete checks again that
   they are finished: an item taken back into work meanwhile stays.
2. Then activities of no item (with their logs), ended sessions, bus chunks, relayed
   outbox rows and audit rows, each by its own rule, a batch at a time.
3. Every batch is one short transaction. A dry run counts each table's rule and deletes
   nothing; both are recorded.
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

# Per table, what may go under a policy at a time (the dry run counts these).
RULES: dict[type[Model], Callable[[Policy, datetime], QuerySet[Any]]] = {
    AgentActivityLog: lambda p, now: selectors.activity_logs(
        p.cutoff(p.items_days, now), p.cutoff(p.activities_days, now)
    ),
    AgentActivity: lambda p, now: selectors.activities(p.cutoff(p.items_days, now), p.cutoff(p.activities_days, now)),
    AgentDecision: lambda p, now: selectors.decisions(p.cutoff(p.items_days, now)),
    ToolCallRecord: lambda p, now: selectors.tool_calls(p.cutoff(p.items_days, now)),
    LLMSession: lambda p, now: selectors.sessions(p.cutoff(p.items_days, now), p.cutoff(p.sessions_days, now)),
    MailboxItem: lambda p, now: selectors.items(p.cutoff(p.items_days, now)),
    Chunk: lambda p, now: selectors.chunks(p.cutoff(p.chunks_days, now)),
    OutboxRecord: lambda p, now: selectors.outbox(p.cutoff(p.outbox_days, now)),
    AuditEvent: lambda p, now: selectors.audit(p.cutoff(p.audit_days, now)),
}
TABLES = tuple(str(model._meta.db_table) for model in RULES)


@dataclass
class Outcome:
    batch_size: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    batches: int = 0

    def delete(self, rows: QuerySet[Any]) -> int:
        """Delete ``rows`` a batch at a time, each batch its own transaction (the rule
        applied again inside it); returns how many went."""
        model, gone = rows.model, 0
        while True:
            pks = list(rows.order_by("pk").values_list("pk", flat=True)[: self.batch_size])
            if not pks:
                return gone
            with transaction.atomic():
                _, per_model = model._default_manager.filter(pk__in=rows.filter(pk__in=pks).values("pk")).delete()
            done = int(per_model.get(model._meta.label, 0))
            self.counts[str(model._meta.db_table)] += done
            self.batches += 1
            gone += done
            if len(pks) < self.batch_size:
                return gone


def _prune_activities(outcome: Outcome, activities: QuerySet[AgentActivity]) -> None:
    while True:
        ids = list(activities.order_by("pk").values_list("pk", flat=True)[: outcome.batch_size])
        if not ids:
            return
        outcome.delete(AgentActivityLog.objects.filter(activity_id__in=ids))
        outcome.delete(AgentActivity.objects.filter(pk__in=ids))
        if len(ids) < outcome.batch_size:
            return


def _prune_items(outcome: Outcome, items: QuerySet[MailboxItem]) -> None:
    while True:
        ids = list(items.order_by("pk").values_list("pk", flat=True)[: outcome.batch_size])
        if not ids:
            return
        _prune_activities(outcome, AgentActivity.objects.filter(mailbox_item_id__in=ids))
        outcome.delete(AgentDecision.objects.filter(mailbox_item_id__in=ids))
        outcome.delete(ToolCallRecord.objects.filter(mailbox_item_id__in=ids))
        outcome.delete(LLMSession.objects.filter(mailbox_item_id__in=ids))
        outcome.delete(MailboxItem.objects.filter(pk__in=ids, status__in=selectors.FINISHED))
        if len(ids) < outcome.batch_size:
            return


def _prune(policy: Policy, now: datetime, outcome: Outcome) -> None:
    _prune_items(outcome, RULES[MailboxItem](policy, now))
    # What is left of these is no item's any more (their items' went in _prune_items).
    _prune_activities(outcome, RULES[AgentActivity](policy, now))
    for model in (LLMSession, Chunk, OutboxRecord, AuditEvent):
        outcome.delete(RULES[model](policy, now))


def prune(*, dry_run: bool = False, trigger: str = PruneRun.Trigger.COMMAND, policy: Policy | None = None) -> PruneRun:
    """Apply the retention policy (settings, unless ``policy`` is given) once; returns
    the recorded run, whose ``counts`` say per table what went (would go: ``dry_run``)."""
    policy = policy or Policy.from_settings()
    now = timezone.now()
    run = PruneRun.objects.create(started_at=now, trigger=trigger, dry_run=dry_run)
    outcome = Outcome(batch_size=int(policy.batch_size))
    try:
        if dry_run:
            outcome.counts = {str(model._meta.db_table): rule(policy, now).count() for model, rule in RULES.items()}
        else:
            _prune(policy, now, outcome)
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        run.counts, run.batches, run.finished_at = outcome.counts, outcome.batches, timezone.now()
        run.save(update_fields=["counts", "batches", "finished_at", "error"])
    log.info("retention %s: %s in %d batches", "dry run" if dry_run else "prune", outcome.counts, outcome.batches)
    return run
