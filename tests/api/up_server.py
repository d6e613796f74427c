"""``manage.py up`` in a child process, measured from outside: the real command
(migrate, the embedded Celery worker and beat, daphne) on its own SQLite file, its
port, and its threads and memory read from ``/proc/<pid>/status``.

``manage(...)`` runs another command on the same database (``shell -c`` to create the
personas a test needs once the server has migrated it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATIENCE_S = 120.0  # how long to wait for the server to start (not asserted)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_status(pid: int, field: str) -> int:
    """A number of ``/proc/<pid>/status``: ``Threads`` (a count), ``VmRSS`` (in kB)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


class UpServer:
    def __init__(self, data_dir: Path, *, settings: str = "markus.settings") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        kept = {
            key: value
            for key, value in os.environ.items()
            if key not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "MARKUS_ENV")
        }
        self.env = kept | {
            "DJANGO_SETTINGS_MODULE": settings,
            "DATABASE_URL": f"sqlite:///{data_dir / 'up.sqlite3'}",
            "MARKUS_DATA_DIR": str(data_dir),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        self.log_path = data_dir / "up.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> UpServer:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "up", "--port", str(self.port)],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"manage.py up exited at start:\n{self.output()}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"manage.py up did not listen within {PATIENCE_S}s:\n{self.output()}")

    def manage(self, *args: str) -> str:
        """Another management command on the server's database; its stdout."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, check=False
        )
        if done.returncode:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stderr[-4000:]}")
        return done.stdout

    def threads(self) -> int:
        return proc_status(self.pid, "Threads")

    def rss_bytes(self) -> int:
        return proc_status(self.pid, "VmRSS") * 1024

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
