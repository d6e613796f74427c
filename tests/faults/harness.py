"""Real processes for the fault suite, each scenario on its own PostgreSQL database and
its own Redis, on 127.0.0.1 only.

- ``PgServer``: creates and drops databases next to the one MARKUS_TEST_PG_URL (or a
  PostgreSQL DATABASE_URL) names; the suite migrates one template per session and
  copies it per scenario. The shared database itself is never written.
- ``RedisServer``: ``redis-server`` on a free port, no persistence, as a subprocess.
- ``Cluster``: the processes of one scenario (``manage.py up``, ``celery worker``,
  ``celery beat``), started with the environment of a scale-out deployment, every one
  killed at teardown (and, should the test process die, by the kernel: PDEATHSIG).
- ``django_on``: points this process's default database connection at the scenario's
  database, so the test reads the records (and seeds agents) with the ORM.
- ``Api`` and ``LoadGenerator``: the load, through the HTTP API like any client.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import psycopg

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
LEASE_SECONDS = 4.0
SWEEP_SECONDS = 2


# ---------------------------------------------------------------------------- waiting


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------- PostgreSQL


def pg_base_url() -> str | None:
    """The PostgreSQL server to create the suite's databases on."""
    for name in ("MARKUS_TEST_PG_URL", "DATABASE_URL"):
        url = os.environ.get(name, "")
        if url.split(":", 1)[0] in ("postgres", "postgresql", "pgsql"):
            return url
    return None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    scheme = "postgres" if parts.scheme == "pgsql" else parts.scheme
    return f"{scheme}://{parts.netloc}/{name}" + (f"?{parts.query}" if parts.query else "")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PgServer:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def admin(self) -> psycopg.Connection:
        try:
            return psycopg.connect(with_database(self.base_url, "postgres"), autocommit=True, connect_timeout=10)
        except psycopg.OperationalError:
            return psycopg.connect(self.base_url, autocommit=True, connect_timeout=10)

    def create(self, name: str, *, template: str | None = None) -> str:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return with_database(self.base_url, name)

    def drop(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def drop_leftovers(self) -> list[str]:
        """Drop the databases of fault-suite runs that were killed before their teardown:
        named ``faults_<pid>_…`` for a pid no longer running here, and not in use."""
        with self.admin() as conn:
            rows = conn.execute(
                "SELECT datname FROM pg_database d WHERE datname ~ '^faults_[0-9]+_' "
                "AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)"
            ).fetchall()
            dropped = []
            for (name,) in rows:
                pid = int(name.split("_")[1])
                if pid != os.getpid() and not pid_alive(pid):
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                    dropped.append(name)
        return dropped

    def connect(self, name: str) -> psycopg.Connection:
        return psycopg.connect(with_database(self.base_url, name), autocommit=True)


# ---------------------------------------------------------------------------- processes


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the child gets SIGKILL when the test process dies, so nothing outlives it."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def process_env(**extra: str) -> dict[str, str]:
    """The environment of a scale-out process: this one's, minus any MARKUS_ or Django
    settings of the test run, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARKUS_")}
    for key in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PGAPPNAME"):
        env.pop(key, None)
    env.update(DJANGO_SETTINGS_MODULE="markus.settings", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def spawn(name: str, argv: list[str], *, env: dict[str, str], workdir: Path) -> Proc:
    log = workdir / f"{name}.log"
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    return Proc(name, popen, log)


def stop_processes(procs: list[Proc], grace: float = 3.0) -> None:
    """SIGCONT (a frozen one must be able to die), SIGTERM, then SIGKILL after ``grace``."""
    for p in procs:
        if p.alive():
            p.signal(signal.SIGCONT)
            p.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=5)


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: Proc | None = None

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            str(self.workdir),
        ]
        self.proc = spawn("redis", argv, env=dict(os.environ), workdir=self.workdir)
        wait_until(self.ping, timeout=10, interval=0.05, what=f"redis-server on port {self.port}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            stop_processes([self.proc], grace=5)
            self.proc = None


class Connects(Protocol):
    """A server the scenario's database lives on (``PgServer``, ``OwnPostgres``)."""

    def connect(self, name: str) -> psycopg.Connection: ...


class Cluster:
    """The processes of one scenario against one database and one Redis."""

    def __init__(self, *, db_url: str, db_name: str, pg: Connects, llm_url: str, workdir: Path) -> None:
        self.db_url = db_url
        self.db_name = db_name
        self.pg = pg
        self.llm_url = llm_url
        self.workdir = workdir
        self.redis = RedisServer(workdir)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, Proc] = {}
        self.retired: list[Proc] = []
        self.llm: Any = None  # the LLM stub (conftest sets it)
        self.extra_env: dict[str, str] = {}  # a scenario's own settings for the processes it starts

    # -- environment and processes

    def env(self, app_name: str) -> dict[str, str]:
        """The environment of a process, a scenario's ``extra_env`` over the defaults."""
        return (
            process_env(
                DATABASE_URL=self.db_url,
                REDIS_URL=self.redis.url,
                PGAPPNAME=app_name,  # libpq: pg_stat_activity.application_name tells the processes apart
                MARKUS_DATA_DIR=str(self.workdir / "data"),
                MARKUS_LLM_PROVIDER="openai",
                MARKUS_LLM_BASE_URL=self.llm_url,
                MARKUS_LLM_API_KEY="faults",
                MARKUS_LLM_MODEL="faults-stub",
                MARKUS_LEASE_SECONDS=str(LEASE_SECONDS),
                MARKUS_SWEEP_SECONDS=str(SWEEP_SECONDS),
                MARKUS_COALESCE_WINDOW_MS="50",
                MARKUS_EXECUTION_RETRY_BASE_S="1",
                MARKUS_EXECUTION_RETRY_CAP_S="4",
                MARKUS_CHAT_TIMEOUT_S="1",
                # The stub model calls a tool server's tool it is offered directly (the
                # counter server's 5 tools would otherwise be found on demand).
                MARKUS_TOOLSERVER_INLINE_TOOLS="16",
                # The MCP test server listens on 127.0.0.1: a tool server on this machine.
                MARKUS_TOOLSERVER_ALLOW_PRIVATE="true",
                LOG_LEVEL="WARNING",
            )
            | self.extra_env
        )

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        old = self.procs.get(name)
        if old is not None:
            self.retired.append(old)
        proc = spawn(name, argv, env=self.env(f"faults-{name}"), workdir=self.workdir)
        self.procs[name] = proc
        return proc

    def start_redis(self) -> None:
        self.redis.start()

    def start_server(self) -> Proc:
        return self._spawn(
            "server", [PY, str(ROOT / "manage.py"), "up", "--host", "127.0.0.1", "--port", str(self.port)]
        )

    def start_worker(self, name: str) -> Proc:
        argv = [PY, "-m", "celery", "-A", "markus", "worker", "--pool", "threads", "-c", "4"]
        argv += ["-n", f"{name}@faults-{os.getpid()}", "--without-heartbeat", "--without-mingle", "--without-gossip"]
        return self._spawn(name, [*argv, "-l", "WARNING"])

    def start_beat(self, name: str = "beat") -> Proc:
        argv = [PY, "-m", "celery", "-A", "markus", "beat", "-l", "WARNING"]
        return self._spawn(name, [*argv, "--schedule", str(self.workdir / f"{name}-schedule")])

    def wait_server(self, timeout: float = 60) -> None:
        def up() -> bool:
            self.check_alive("server")
            try:
                urllib.request.urlopen(f"{self.base}/api/schema/", timeout=2).close()
                return True
            except urllib.error.HTTPError:
                return True  # it answers
            except OSError:
                return False

        wait_until(up, timeout=timeout, interval=0.2, what="the server (manage.py up)")

    def wait_workers(self, *names: str, timeout: float = 60) -> None:
        """Until every named worker answers a remote-control ping."""
        from celery import Celery

        probe = Celery("faults-probe", broker=self.redis.url)
        wanted = {f"{n}@faults-{os.getpid()}" for n in names}

        def ready() -> bool:
            for n in names:
                self.check_alive(n)
            try:
                replies = probe.control.ping(timeout=0.5)
            except Exception:
                return False
            return wanted <= {name for r in replies for name in r}

        try:
            wait_until(ready, timeout=timeout, interval=0.2, what=f"workers {sorted(wanted)}")
        finally:
            probe.close()

    def check_alive(self, name: str) -> None:
        proc = self.procs[name]
        if not proc.alive():
            raise AssertionError(f"{name} exited with {proc.popen.returncode}:\n{proc.tail()}")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> Proc:
        proc = self.procs[name]
        proc.signal(sig)
        if sig == signal.SIGKILL:
            proc.popen.wait(timeout=10)
        return proc

    def worker_of_pid(self, pid: int) -> str | None:
        return next((n for n, p in self.procs.items() if p.pid == pid and p.alive()), None)

    def stop(self) -> None:
        stop_processes([*self.procs.values(), *self.retired])
        self.redis.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} (pid {p.pid}) ---\n{p.tail()}" for p in [*self.retired, *self.procs.values()])

    # -- the database, from outside Django

    def sql(self, query: str, *params: Any) -> list[tuple]:
        with self.pg.connect(self.db_name) as conn:
            cursor = conn.execute(query, params or None)
            return cursor.fetchall() if cursor.description else []


# ---------------------------------------------------------------------------- Django in this process


def use_in_memory_layer(monkeypatch: Any) -> None:
    """This process's events stay in its memory (the embedded layer): a scenario's test
    process touches no Redis but the scenario's, and that only through its processes."""
    from channels.layers import channel_layers
    from django.conf import settings

    in_memory = {"default": {"BACKEND": "markus.core.channel_layer.ThreadSafeInMemoryChannelLayer"}}
    monkeypatch.setattr(settings, "CHANNEL_LAYERS", in_memory)
    monkeypatch.setattr(channel_layers, "backends", {})


@contextlib.contextmanager
def django_on(db_url: str) -> Iterator[None]:
    """Point the default database connection of this process (every thread) at
    ``db_url``; restore it afterwards."""
    import environ
    from django.db import connections

    config = environ.Env.db_url_config(db_url)
    config["CONN_MAX_AGE"] = 0
    databases = connections.settings
    saved = databases["default"]

    def drop_connection() -> None:
        connections["default"].close()
        with contextlib.suppress(AttributeError):
            del connections["default"]

    drop_connection()
    databases["default"] = connections.configure_settings({"default": config})["default"]
    try:
        yield
    finally:
        drop_connection()
        databases["default"] = saved


@dataclass
class Seeded:
    token: str
    agents: list[str]


def start_beat_clocks() -> None:
    """Start every beat entry's clock now, as a freshly migrated deployment's beat finds it.

    The scenario's database is a copy of a template migrated at the session's start, and
    beat counts an entry that never ran from when its row changed: in a scenario run more
    than 5 minutes later the heartbeat entry was due at once, and its tick came whenever
    the beat process got going under the machine's load, sometimes after the scenario had
    settled (two heartbeats then open at the count: "lost")."""
    from django.utils import timezone
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.update(date_changed=timezone.now(), last_run_at=None)


def seed(n_agents: int = 8) -> Seeded:
    """alice, her API token, a team and ``n_agents`` agents ag1..agN."""
    from django.contrib.auth.models import User

    from markus.agents.models import Team
    from markus.agents.services import agent_create, user_token_create

    alice = User.objects.create_user("alice", password="pw-alice")
    _, token = user_token_create(alice)
    team = Team.objects.create(name="Faults", owner=alice)
    agents = [
        agent_create(name=f"Agent {i}", role="engineer", owner=alice, team=team, agent_id=f"ag{i}")[0].id
        for i in range(1, n_agents + 1)
    ]
    return Seeded(token, agents)


# ---------------------------------------------------------------------------- load


class Api:
    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.token = token

    def post(self, path: str, body: dict[str, Any], timeout: float = 30) -> tuple[int, Any]:
        status, answer, _ = self.send(path, body, timeout)
        return status, answer

    def send(self, path: str, body: dict[str, Any], timeout: float = 30) -> tuple[int, Any, Any]:
        """``post``, with the answer's headers."""
        request = urllib.request.Request(
            f"{self.base}{path}",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null"), response.headers
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")[:300], exc.headers


@dataclass
class Plan:
    """Per agent: human chats, system events, and tasks it is assigned (its reviewer is
    the next agent)."""

    chats: int = 5
    events: int = 5
    tasks: int = 2
    seconds: float = 10.0  # the requests are spread evenly over this


def requests_for(agents: list[str], plan: Plan, seed: int = 11) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for i, agent in enumerate(agents):
        for n in range(plan.chats):
            text = f"Question {n} for {agent}: what is the status of your work?"
            payload = {"summary": text[:60], "content": text}
            out.append((f"/api/agents/{agent}/mailbox", {"sourceType": "human_chat", "payload": payload}))
        for n in range(plan.events):
            text = f"System event {n} for {agent}: deployment {n} finished."
            payload = {"summary": text[:60], "content": text}
            out.append((f"/api/agents/{agent}/mailbox", {"sourceType": "system_event", "payload": payload}))
        for n in range(plan.tasks):
            reviewer = agents[(i + 1) % len(agents)]
            body = {"title": f"Task {n} of {agent}", "description": "Do it.", "assigneeId": agent}
            out.append(("/api/tasks/", {**body, "reviewerId": reviewer}))
    random.Random(seed).shuffle(out)
    return out


@dataclass
class LoadGenerator:
    api: Api
    requests: list[tuple[str, dict[str, Any]]]
    seconds: float
    # A client that honours a 503's Retry-After: sends the request again, this many times
    # at most (0: a 503 is an error like any other).
    resend_503: int = 0
    sent: int = 0
    resent: int = 0
    errors: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self) -> LoadGenerator:
        self.thread = threading.Thread(target=self._run, name="faults-load", daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        start = time.monotonic()
        step = self.seconds / max(1, len(self.requests))
        for n, (path, body) in enumerate(self.requests):
            time.sleep(max(0.0, start + n * step - time.monotonic()))
            for attempt in range(self.resend_503 + 1):
                try:
                    status, answer, headers = self.api.send(path, body)
                except OSError as exc:
                    self.errors.append(f"{path}: {exc}")
                    break
                if status == 503 and attempt < self.resend_503 and headers.get("Retry-After"):
                    self.resent += 1
                    time.sleep(float(headers["Retry-After"]))
                    continue
                if status >= 300:
                    self.errors.append(f"{path}: {status} {answer}")
                else:
                    self.sent += 1
                break

    def join(self, timeout: float = 120) -> None:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the load generator did not finish"


def boot(
    c: Cluster, *, agents: int = 8, server: bool = True, workers: tuple[str, ...] = ("w1", "w2"), beats: int = 1
) -> Seeded:
    """Seed the agents, start the processes (all at once) and wait until they serve."""
    seeded = seed(agents)
    if server:
        c.start_server()
    for name in workers:
        c.start_worker(name)
    for n in range(beats):
        c.start_beat("beat" if n == 0 else f"beat{n + 1}")
    if server:
        c.wait_server()
    c.wait_workers(*workers)
    return seeded


# ---------------------------------------------------------------------------- leases


def leased_by(pid: int, *, in_flight: bool = True) -> list[str]:
    """Agents whose live lease a process (by pid) holds (with an item in flight)."""
    from django.utils import timezone

    from attention.models import AgentAttention
    from mailbox.models import MailboxItem

    held = AgentAttention.objects.filter(
        lease_owner__contains=f":{pid}:", lease_expires_at__gt=timezone.now()
    ).values_list("agent_id", flat=True)
    if not in_flight:
        return sorted(held)
    busy = MailboxItem.objects.filter(agent_id__in=list(held), status="processing").values_list("agent_id", flat=True)
    return sorted(set(busy))
