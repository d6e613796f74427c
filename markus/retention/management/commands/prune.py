"""``manage.py prune [--dry-run] [--batch-size N]``: apply the retention policy now and
print, per table, how many rows went (with --dry-run: would go; nothing is removed)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from markus.retention.models import PruneRun
from markus.retention.policy import Policy
from markus.retention.services import prune


class Command(BaseCommand):
    help = "Remove what the retention policy (MARKUS['RETENTION']) lets go; --dry-run only counts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count what would go, remove nothing")
        parser.add_argument("--batch-size", type=int, default=None, help="rows per delete transaction")

    def handle(self, *args: Any, **options: Any) -> None:
        overrides = {} if options["batch_size"] is None else {"batch_size": options["batch_size"]}
        try:
            policy = Policy.from_settings(**overrides)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        run = prune(dry_run=options["dry_run"], trigger=PruneRun.Trigger.COMMAND, policy=policy)
        verb = "would remove" if run.dry_run else "removed"
        heading = "dry run, nothing removed" if run.dry_run else f"{run.batches} batches"
        self.stdout.write(f"prune ({heading}):")
        width = max(len(table) for table in run.counts)
        for table, count in run.counts.items():
            self.stdout.write(f"  {table:<{width}}  {count:>8}")
        self.stdout.write(f"  {'total':<{width}}  {run.total:>8}  ({verb})")
