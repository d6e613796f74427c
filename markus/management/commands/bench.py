"""``manage.py bench <suite>``: run a benchmark on the configured database."""

from __future__ import annotations

import importlib
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

SUITES = ["mailbox", "attention", "agentbus"]


class Command(BaseCommand):
    help = "Measure a subsystem on the configured database and print rates and ratios."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("suite", choices=SUITES)
        parser.add_argument("--n", type=int, default=None, help="how many items (each suite has a default)")

    def handle(self, *args: Any, suite: str, **options: Any) -> None:
        # Imported here so one suite's dependencies never break another suite.
        module = importlib.import_module(f"markus.bench.{suite}")
        module.run(self.stdout, options)
