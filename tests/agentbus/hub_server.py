"""A real hub for hub-mode tests: daphne serving ``markus.asgi`` in a subprocess, on
the test database (so tests using it need ``django_db(transaction=True)``).

pytest-django's ``live_server`` is a threaded WSGI server: it would run the async
inbox view through ``async_to_sync`` in a thread per request, which is not how the
view runs in production. Daphne is what ``manage.py up`` serves with.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from django.conf import settings
settings.DATABASES["default"]["NAME"] = sys.argv[1]
settings.MARKUS.update(json.loads(sys.argv[3]))
import django
django.setup()
from daphne.cli import CommandLineInterface
CommandLineInterface().run(["-b", "127.0.0.1", "-p", sys.argv[2], "markus.asgi:application"])
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HubServer:
    def __init__(self, db_name: str, *, markus: dict | None = None, env: dict[str, str] | None = None) -> None:
        self.db_name = db_name
        self.markus = markus or {}
        self.env = env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()

    def start(self, timeout: float = 30.0) -> HubServer:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "markus.settings.test", **self.env}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, self.db_name, str(self.port), json.dumps(self.markus)],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited at start:\n{self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the hub did not start within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.log.close()
