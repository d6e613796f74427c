"""Server errors are logged with their traceback to the console under ``manage.py up``
(issue 14): the real command (migrate, the embedded Celery worker and beat, daphne) in
a child process, a view that raises, and the traceback read from the process's stderr."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATIENCE_S = 120.0  # how long to wait for the server to start and to log (not asserted)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.2)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_500_under_up_prints_its_traceback_to_the_console(tmp_path):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "MARKUS_ENV")
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "tests.api.up_settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'up.sqlite3'}",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    stderr_path = tmp_path / "stderr.log"
    with open(stderr_path, "wb") as stderr, open(tmp_path / "stdout.log", "wb") as stdout:
        child = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
        try:
            wait_until(lambda: listening(port) or child.poll() is not None, "the server listening")
            assert child.poll() is None, stderr_path.read_text()
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/crash/", timeout=PATIENCE_S)
            assert answer.value.code == 500
            wait_until(lambda: "kaboom under manage.py up" in stderr_path.read_text(), "the error in the log")
        finally:
            child.terminate()
            child.wait(timeout=PATIENCE_S)
    log = stderr_path.read_text()
    assert "Internal Server Error: /crash/" in log
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: kaboom under manage.py up" in log
