"""``GET /healthz``: can this process reach its database, its Celery broker and its
channel layer?

1. Every check runs in its own daemon thread and the answer waits for them at most
   ``CHECK_TIMEOUT_S`` in all, so a Redis that went away answers 503 in about a second
   instead of hanging the probe (clients get short socket timeouts too, so the threads
   end by themselves). A check whose previous run is still stuck is not started again:
   it fails as ``busy``, which bounds the threads a dead dependency can hold.
2. 200 with ``status: ok`` when every critical check passed, else 503 with
   ``status: fail``; each check says ``ok`` or ``fail`` and how long it took.
3. No authentication, so nothing sensitive: an error is named by its class (the message,
   which may hold a host or a user name, goes to the log).

``beat`` is informative and never fails the probe: beat runs in exactly one process, and
a stale beat must not take every web process out of a load balancer. It reads when the
sweep last ran from django-celery-beat's table (written at most every ~3 minutes).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections.abc import Callable
from datetime import UTC
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from attention.tasks import sweep as sweep_task

log = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 1.5
# django-celery-beat's DatabaseScheduler writes ``last_run_at`` every 3 minutes.
BEAT_SYNC_SLACK_S = 240.0

CheckResult = dict[str, Any] | None
Check = Callable[[], CheckResult]


# ---------------------------------------------------------------------------- the checks


def check_database() -> CheckResult:
    """A trivial query on a connection of this thread's own (closed afterwards)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()
    return None


def broker_url() -> str:
    return str(getattr(settings, "CELERY_BROKER_URL", "") or "")


def check_broker() -> CheckResult:
    """Redis: a PING with short timeouts. The embedded memory transport lives in this
    process: nothing to reach. Anything else: a kombu connection attempt."""
    url = broker_url()
    scheme = url.split("://", 1)[0].lower()
    if scheme == "memory":
        return {"detail": "embedded"}
    if scheme in ("redis", "rediss"):
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=CHECK_TIMEOUT_S, socket_timeout=CHECK_TIMEOUT_S)
        try:
            client.ping()
        finally:
            client.close()
        return None
    from kombu import Connection

    with Connection(url, connect_timeout=CHECK_TIMEOUT_S) as conn:
        conn.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT_S)
    return None


async def _round_trip() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    channel = await layer.new_channel()
    marker = secrets.token_hex(8)
    await layer.send(channel, {"type": "healthz.ping", "marker": marker})
    message = await layer.receive(channel)
    if message.get("marker") != marker:
        raise RuntimeError("channel layer returned another message")


def check_channel_layer() -> CheckResult:
    """A send/receive round trip on a fresh channel, in a loop of this thread's own
    (closing the loop closes the Redis layer's connections for it)."""
    asyncio.run(asyncio.wait_for(_round_trip(), CHECK_TIMEOUT_S))
    return None


def check_beat() -> CheckResult:
    """When beat last ran the sweep: ``ok``, ``stale`` or ``unknown`` (never ran here)."""
    from django_celery_beat.models import PeriodicTask

    try:
        row = PeriodicTask.objects.filter(task=sweep_task.name, enabled=True).select_related("interval").first()
    finally:
        connection.close()
    if row is None or row.last_run_at is None:
        return {"status": "unknown"}
    last = row.last_run_at if timezone.is_aware(row.last_run_at) else row.last_run_at.replace(tzinfo=UTC)
    age = max(0.0, (timezone.now() - last).total_seconds())
    every = row.interval.schedule.run_every.total_seconds() if row.interval else settings.MARKUS["SWEEP_SECONDS"]
    fresh = age <= BEAT_SYNC_SLACK_S + 4 * every
    return {"status": "ok" if fresh else "stale", "lastRunAgeSeconds": round(age, 1)}


CRITICAL: dict[str, Check] = {
    "database": check_database,
    "broker": check_broker,
    "channel_layer": check_channel_layer,
}
INFORMATIVE: dict[str, Check] = {"beat": check_beat}


# ---------------------------------------------------------------------------- running them

_running: dict[str, threading.Thread] = {}
_running_lock = threading.Lock()


class _Probe:
    """One check in a daemon thread; ``result`` waits for it until a shared deadline."""

    def __init__(self, name: str, check: Check) -> None:
        self.name, self.check = name, check
        self.outcome: dict[str, Any] = {}
        self.started = time.monotonic()
        with _running_lock:
            previous = _running.get(name)
            self.busy = previous is not None and previous.is_alive()
            if self.busy:
                return
            self.thread = threading.Thread(target=self._run, name=f"healthz-{name}", daemon=True)
            _running[name] = self.thread
            self.thread.start()

    def _run(self) -> None:
        try:
            self.outcome["extra"] = self.check()
        except BaseException as exc:  # a check must never take the probe down with it
            log.warning("healthz: %s check failed: %r", self.name, exc)
            self.outcome["error"] = type(exc).__name__

    def result(self, deadline: float) -> dict[str, Any]:
        if self.busy:
            return {"status": "fail", "error": "busy"}
        self.thread.join(max(0.0, deadline - time.monotonic()))
        ms = round((time.monotonic() - self.started) * 1000, 1)
        if self.thread.is_alive():
            log.warning("healthz: %s check timed out after %.0f ms", self.name, ms)
            return {"status": "fail", "ms": ms, "error": "timeout"}
        if "error" in self.outcome:
            return {"status": "fail", "ms": ms, "error": self.outcome["error"]}
        return {"status": "ok", "ms": ms, **(self.outcome.get("extra") or {})}


def run_checks(timeout: float = CHECK_TIMEOUT_S) -> tuple[bool, dict[str, dict[str, Any]]]:
    """Run every check at once; True when every critical one passed."""
    probes = [_Probe(name, check) for name, check in {**CRITICAL, **INFORMATIVE}.items()]
    deadline = time.monotonic() + timeout
    results = {probe.name: probe.result(deadline) for probe in probes}
    return all(results[name]["status"] == "ok" for name in CRITICAL), results


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    healthy, checks = run_checks()
    return JsonResponse({"status": "ok" if healthy else "fail", "checks": checks}, status=200 if healthy else 503)
