"""A real Celery worker in the test process (not eager mode), and helpers to wait for
the loop. The worker thread has its own database connection, so tests that use it run
with ``django_db(transaction=True)``."""
from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from markus.celery import app as celery_app
from markus.llm.base import set_provider_override


@pytest.fixture
def wake_on_enqueue():
    old = settings.MARKUS["WAKE_ON_ENQUEUE"]
    settings.MARKUS["WAKE_ON_ENQUEUE"] = True
    yield
    settings.MARKUS["WAKE_ON_ENQUEUE"] = old


@pytest.fixture
def celery_worker(transactional_db, wake_on_enqueue):
    celery_app.conf.task_always_eager = False
    with start_worker(celery_app, pool="threads", concurrency=2, perform_ping_check=False,
                      shutdown_timeout=15, loglevel="WARNING") as worker:
        yield worker


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
