"""A record of each prune (``services.prune``): when, how it was started, whether it
was a dry run, and how many rows it removed (or would remove) per table."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class PruneRun(models.Model):
    class Trigger(models.TextChoices):
        BEAT = "beat"
        COMMAND = "command"

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    dry_run = models.BooleanField(default=False)
    # {table name: rows removed (a dry run: rows that would be)}, every table of the policy.
    counts = models.JSONField(default=dict)
    batches = models.IntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "retention_prune_runs"
        ordering = ["-started_at", "-id"]
        verbose_name = "prune run"

    def __str__(self) -> str:
        kind = "dry run" if self.dry_run else "prune"
        return f"{kind} at {self.started_at:%Y-%m-%d %H:%M} ({self.total} rows)"

    @property
    def total(self) -> int:
        return sum(int(n) for n in (self.counts or {}).values())

    @property
    def nonzero_counts(self) -> list[tuple[str, int]]:
        return [(table, int(n)) for table, n in (self.counts or {}).items() if n]
