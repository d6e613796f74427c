"""``manage.py bench <suite>`` and ``manage.py bench all``: run benchmarks on the configured
database (``DATABASE_URL``, ``REDIS_URL``) and print every figure beside its baseline,
measured in the same run, and its goal.

``bench all`` runs every suite in one process (``--only a,b`` for a subset): each suite's
detail lines, then one table of all figures and the environment; ``--json PATH`` writes
the same as JSON. A suite that raises is reported as failed (its traceback on stderr) and
the others still run; the exit status is non-zero only then. A figure that misses its
goal is printed as such, never an error.
"""

from __future__ import annotations

import importlib
import io
import json
import time
import traceback
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from markus import bench
from markus.bench import report
from markus.bench.report import Figure

ERROR_WIDTH = 160  # of a crashed suite's error in the table; stderr has the traceback, --json all of it


class Command(BaseCommand):
    help = "Measure subsystems on the configured database; print each figure beside its baseline and goal."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("suite", choices=["all", *bench.SUITES, *bench.POSTGRESQL_ONLY])
        parser.add_argument("--n", type=int, default=None, help="how many items (each suite has a default)")
        parser.add_argument("--only", default="", help="with all: a comma-separated subset of the suites")
        parser.add_argument("--json", default="", metavar="PATH", help="also write the figures as JSON to PATH")
        parser.add_argument(
            "--subscribers", type=int, default=None, help="websocket: how many sockets watch the agent (100)"
        )
        parser.add_argument(
            "--install", action="store_true", help="peers: pip-install the peer queues first (never a dependency)"
        )

    def handle(self, *args: Any, suite: str, **options: Any) -> None:
        if suite != "all":
            if options["only"]:
                raise CommandError("--only goes with `bench all`")
            figures = self._run(suite, options)
            self._summary(figures, {}, {}, options["json"])
            return
        figures, failed, skipped = [], {}, {}
        for name in self._selection(options["only"]):
            if name in bench.POSTGRESQL_ONLY and connection.vendor != "postgresql" and not options["only"]:
                skipped[name] = f"PostgreSQL only (the configured database is {connection.vendor})"
                continue
            self.stdout.write(f"== {name} ==")
            start = time.monotonic()
            try:
                figures += self._run(name, options)
            except Exception as exc:  # report it and go on: one broken suite must not hide the rest
                failed[name] = f"{type(exc).__name__}: {exc}"
                self.stderr.write(f"bench {name} crashed:\n{traceback.format_exc()}")
            self.stdout.write(
                f"== {name}: {'FAILED' if name in failed else 'done'} in {time.monotonic() - start:.1f} s"
            )
        self.stdout.write("")
        self._summary(figures, failed, skipped, options["json"])
        if failed:
            raise CommandError(f"{len(failed)} suite(s) crashed: {', '.join(failed)}")

    def _selection(self, only: str) -> list[str]:
        known = [*bench.SUITES, *bench.POSTGRESQL_ONLY]
        if not only:
            return known
        wanted = [name.strip() for name in only.split(",") if name.strip()]
        unknown = [name for name in wanted if name not in known]
        if unknown or not wanted:
            raise CommandError(
                f"--only: unknown suite(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}"
            )
        return [name for name in known if name in wanted]

    def _run(self, name: str, options: dict[str, Any]) -> list[Figure]:
        # Imported here so one suite's dependencies never break another suite.
        module = importlib.import_module(f"markus.bench.{name}")
        result = module.run(self.stdout, options)
        if not isinstance(result, list):
            self.stdout.write(f"({name} returned no figures for the table)")
            return []
        return result

    def _summary(self, figures: list[Figure], failed: dict[str, str], skipped: dict[str, str], path: str) -> None:
        env = report.environment()
        self.stdout.write("environment: " + " | ".join(f"{key} {value}" for key, value in env.items()))
        report.write_table(self.stdout, figures)
        width = max([len("suite"), *(len(f.suite) for f in figures), *map(len, failed), *map(len, skipped)])
        for name, error in failed.items():
            first = error.splitlines()[0] if error else ""
            shown = first if len(first) <= ERROR_WIDTH else first[: ERROR_WIDTH - 1] + "…"
            self.stdout.write(f"{name.ljust(width)}  FAILED  {shown}")
        for name, reason in skipped.items():
            self.stdout.write(f"{name.ljust(width)}  skipped  {reason}")
        met = sum(f.meets_goal is True for f in figures)
        missed = sum(f.meets_goal is False for f in figures)
        self.stdout.write(
            f"{len(figures)} figures, {met} meet their goal, {missed} miss it"
            + (f", {len(failed)} suite(s) FAILED" if failed else "")
        )
        if path:
            buffer = io.StringIO()
            report.write_json(buffer, figures)
            doc = json.loads(buffer.getvalue())
            doc["failed"] = failed
            doc["skipped"] = skipped
            Path(path).write_text(json.dumps(doc, indent=2) + "\n")
            self.stdout.write(f"figures written to {path}")
