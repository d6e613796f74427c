"""A PostgreSQL server of the test's own, to crash: ``initdb`` in a temporary directory,
``postgres`` on a free port of 127.0.0.1 (trust, no other client), crashed (every one of
its processes frozen, then ``kill -9``: shared memory and the WAL not yet written are
gone, what was written to the files is kept, as after a crash of the server's processes
with the machine's page cache intact) and started again (crash recovery replays the WAL
on disk).

The shared server of the suite (``PgServer``) is never crashed: other tests use it.
As root, the server runs as the ``postgres`` user (``initdb`` refuses root)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from .harness import free_port, wait_until


def _bindir() -> Path:
    """The server's programs: Debian keeps them out of PATH, one directory per version."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("no initdb: the PostgreSQL server programs are not installed")
    return Path(initdb).parent


class OwnPostgres:
    def __init__(self) -> None:
        self.bin = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="markus-own-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.as_root = os.geteuid() == 0
        if self.as_root:  # the server's user must own its directory and reach it
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, "postgres", "postgres")
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])

    def _user(self) -> dict[str, Any]:
        """As root, the server's programs run as ``postgres`` (no wrapper process between)."""
        return {"user": "postgres", "group": "postgres", "extra_groups": []} if self.as_root else {}

    def _run(self, argv: list[str]) -> None:
        subprocess.run(argv, check=True, capture_output=True, timeout=120, cwd=self.root, **self._user())

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start the server and wait until it takes connections. ``wal_writer_delay`` at its
        most (10 s), so a commit that is not waited for is rarely written on its own; a test
        that needs it unwritten also freezes the WAL writer (``freeze_wal_writer``)."""
        argv = [
            str(self.bin / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={self.root}",
            "-c",
            "wal_writer_delay=10000ms",
        ]
        with open(self.root / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root, **self._user()
            )
        wait_until(self._ready, timeout=60, interval=0.1, what="the own PostgreSQL server to take connections")

    def _ready(self) -> bool:
        try:
            psycopg.connect(self.url(), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def connect(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.url(database), autocommit=True)

    def copy_database(self, source_url: str, name: str) -> str:
        """A database ``name`` here holding what ``source_url``'s holds (schema and rows)."""
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dump = subprocess.run(
            [str(self.bin / "pg_dump"), "--no-owner", "--no-acl", "-d", source_url],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [str(self.bin / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url(name)],
            input=dump.stdout,
            check=True,
            capture_output=True,
            timeout=120,
        )
        return self.url(name)

    def freeze_wal_writer(self) -> None:
        """Stop the WAL writer (SIGSTOP): a commit not waited for stays in shared memory
        until a commit that is waited for writes the WAL up to its own record."""
        with self.connect() as conn:
            pids = [pid for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")]
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGSTOP)

    def _processes(self) -> list[int]:
        """The postmaster and its children (each backend leads its own process group)."""
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return []
        postmaster = int(pid_file.read_text().split()[0])
        pids = [postmaster]
        for stat in glob.glob("/proc/[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # pid (comm) state ppid …: comm may hold spaces, so split after its ")"
                if int(Path(stat).read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(stat.split("/")[2]))
        return pids

    def crash(self) -> None:
        """``kill -9`` of the server: every process of it frozen first (none runs on, none
        sees another die), then killed."""
        assert self.proc is not None
        pids = self._processes()
        assert pids, "the server is not running"
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        self.proc.wait(timeout=30)
        wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=30, interval=0.05, what="the server's end")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.crash()
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False
