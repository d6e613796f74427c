"""``manage.py up``: migrate, then serve HTTP + WebSocket (daphne). Without REDIS_URL the
Celery worker and beat run inside this process; with it, they run as
``celery -A markus worker`` and ``celery -A markus beat``."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Migrate and serve Markus (embedded worker and beat unless REDIS_URL is set)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        from attention.services import sweep, sync_beat_schedule

        call_command("migrate", interactive=False, verbosity=0)
        # The declared beat entries, created where missing (migrate's post_migrate made them
        # already); an entry an operator changed in the console is kept as it is.
        sync_beat_schedule()
        if not settings.REDIS_URL:
            from markus.celery import app
            from markus.embedded import start_beat_thread, start_worker_thread

            start_worker_thread(app)
            start_beat_thread(app)
            self.stdout.write("embedded Celery worker and beat started (memory transport)")
        from markus.work.liveness import tasks_resume_in_progress

        resumed = tasks_resume_in_progress()  # re-create execution items of tasks in progress
        if resumed:
            self.stdout.write(f"resumed {len(resumed)} task(s) in progress")
        sweep()  # start-up: kick agents with work left from before (recovery runs on lease take)
        base = f"http://{host}:{port}"
        self.stdout.write(
            f"Markus at {base}/\n"
            f"  operator console  {base}/admin/   (demo login: admin / admin after `manage.py demo`)\n"
            f"  an agent's mind   {base}/agents/<agent id>/mind/   (demo: {base}/agents/ada/mind/)\n"
            f"  API docs          {base}/api/docs/"
        )
        from daphne.cli import CommandLineInterface

        try:
            CommandLineInterface().run(["-b", host, "-p", str(port), "markus.asgi:application"])
        finally:
            # Daphne took the signal and stopped serving: the embedded worker's runs let go
            # of their work at their next safe point, so the process ends (markus.core.shutdown).
            if not settings.REDIS_URL:
                self.let_go()

    def let_go(self) -> None:
        """Ask the embedded worker to stop and wait for its runs to let go of their work
        (at most ``MARKUS_SHUTDOWN_GRACE_S``); then end the process, whose pool threads
        would otherwise hold it as long as the call they wait on. A run still in flight
        then has its lease run out, so the next start recovers its item at once."""
        from attention.lease import leases_end_with_this_process
        from markus.core.shutdown import in_flight, stop_worker

        stop_worker()
        deadline = time.monotonic() + float(settings.MARKUS["SHUTDOWN_GRACE_S"])
        while in_flight() and time.monotonic() < deadline:
            time.sleep(0.05)
        if left := in_flight():
            ended = leases_end_with_this_process()
            self.stderr.write(f"{left} run(s) still in flight at shutdown; {ended} lease(s) let go for the next start")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
