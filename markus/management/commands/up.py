"""``manage.py up``: migrate, then serve HTTP + WebSocket (daphne). Without REDIS_URL the
Celery worker and beat run inside this process; with it, they run as
``celery -A markus worker`` and ``celery -A markus beat``."""

from __future__ import annotations

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

        CommandLineInterface().run(["-b", host, "-p", str(port), "markus.asgi:application"])
