"""A real Celery worker in the test process (not eager mode), and helpers to wait for
the loop. The worker thread has its own database connection, so tests that use it run
with ``django_db(transaction=True)``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from celery.worker import state as worker_state
from django.conf import settings

from markus.celery import app as celery_app
from markus.embedded import DOORBELL
from markus.llm.base import set_provider_override


@pytest.fixture
def wake_on_enqueue(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", True)


@pytest.fixture
def celery_worker(transactional_db, wake_on_enqueue, monkeypatch):
    celery_app.conf.task_always_eager = False
    with start_worker(
        celery_app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=15, loglevel="WARNING"
    ) as worker:
        yield worker
        _quiesce(monkeypatch)
        stop_waiting()  # its wait for work ends now, not at the drain's timeout (2 s a test)


def stop_waiting() -> None:
    """Ask this process's worker to stop (as Celery's ``state.maybe_shutdown`` reads it)
    and ring, so its wait for work on the embedded broker ends now, not at the drain's
    timeout (2 s). ``start_worker`` sets the flag again and clears it once joined."""
    worker_state.should_terminate = 0
    DOORBELL.ring()


def _quiesce(monkeypatch: pytest.MonkeyPatch, timeout: float = 30.0) -> None:
    """Let the loop go quiet before the worker stops and the test database is flushed
    (on PostgreSQL a flush that races a running loop deadlocks): no more wake-ups, every
    agent paused (the loop stops at its next check), then wait for the leases to go.
    The switch goes through the test's ``monkeypatch``, which restores it after the
    worker has stopped."""
    from django.utils import timezone

    from attention.models import AgentAttention
    from markus.agents.models import Agent

    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)
    Agent.objects.update(status=Agent.RunStatus.PAUSED)
    deadline = time.monotonic() + timeout
    while (
        time.monotonic() < deadline
        and AgentAttention.objects.exclude(lease_owner="").filter(lease_expires_at__gt=timezone.now()).exists()
    ):
        time.sleep(0.05)


@pytest.fixture
def scripted():
    """Install a scripted provider for this process; yields a factory."""
    from markus.llm.scripted import ScriptedProvider

    holder = {}

    def install(*turns, **kw):
        provider = ScriptedProvider(list(turns), **kw)
        holder["p"] = provider
        set_provider_override(provider)
        return provider

    yield install
    set_provider_override(None)


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


@pytest.fixture
def brain(settings, monkeypatch):
    """Install an ``EffectBrain`` (tests/attention/crashes.py) for this process: by
    default it saves an observation with the crash tests' marker."""
    from .crashes import MARKER, EffectBrain

    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)

    def install(tool: str = "memory_save", arguments: dict | None = None, **kw) -> EffectBrain:
        b = EffectBrain(tool, {"content": f"remember {MARKER}"} if arguments is None else arguments, **kw)
        set_provider_override(b)
        return b

    yield install
    set_provider_override(None)


@pytest.fixture
def offline_loop(settings, monkeypatch):
    """The loop on the offline brain, without deliberation; returns a setter for more
    ``MARKUS`` settings (``offline_loop(WAKE_ON_ENQUEUE=False)``)."""
    set_provider_override(None)
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)

    def more(**values) -> None:
        for key, value in values.items():
            monkeypatch.setitem(settings.MARKUS, key, value)

    return more


ROOT = Path(__file__).resolve().parents[2]


def worker_process(name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real ``celery worker`` process, as the README starts one (the threads pool), named
    ``name``; its errors on ``stderr``."""
    argv = [sys.executable, "-m", "celery", "-A", "markus", "worker", "--pool", "threads", "-c", "2"]
    argv += ["-n", f"{name}@%h", "--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "WARNING"]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
