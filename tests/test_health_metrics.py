"""Operating Markus: /healthz answers fast, also when a dependency is gone, and /metrics
reads the queue, the decisions, recovery, the outbox and the timings from the database,
for staff, the metrics token or this machine only."""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from agentbus.models import OutboxRecord
from attention import loop
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue, mailbox_recover
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.ops import health

REMOTE = "203.0.113.7"  # TEST-NET-3: a caller that is not this machine


@pytest.fixture(autouse=True)
def probes_finish():
    """A check left running by a test (a hung socket) would answer the next test's probe
    as ``busy``: wait for the threads."""
    yield
    for thread in list(health._running.values()):
        thread.join(10)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_health(client):
    started = time.monotonic()
    response = client.get("/healthz")
    return response, response.json(), time.monotonic() - started


# ---------------------------------------------------------------------------- /healthz


def test_healthz_is_ok_on_the_embedded_default(client, db, settings):
    response, body, elapsed = get_health(client)
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert {name: check["status"] for name, check in body["checks"].items() if name != "beat"} == {
        "database": "ok",
        "broker": "ok",
        "channel_layer": "ok",
    }
    assert body["checks"]["beat"]["status"] in ("ok", "stale", "unknown")
    assert response["Cache-Control"].startswith("max-age=0")
    assert str(settings.DATABASES["default"]["NAME"]) not in response.content.decode()
    assert elapsed < 3


def test_healthz_answers_503_within_seconds_when_the_broker_port_is_closed(client, db, settings):
    settings.CELERY_BROKER_URL = f"redis://:hunter2@127.0.0.1:{closed_port()}/0"
    response, body, elapsed = get_health(client)
    assert response.status_code == 503
    assert body["status"] == "fail"
    assert body["checks"]["broker"]["status"] == "fail"
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["channel_layer"]["status"] == "ok"
    assert elapsed < 3, elapsed
    text = response.content.decode()
    assert "hunter2" not in text and "127.0.0.1" not in text  # the error's class, not its message


def test_healthz_answers_503_within_seconds_when_redis_accepts_but_never_answers(client, db, settings):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever replies
    try:
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        response, body, elapsed = get_health(client)
    finally:
        silent.close()
    assert response.status_code == 503
    assert body["checks"]["broker"]["status"] == "fail"
    assert body["checks"]["broker"]["error"] in ("timeout", "TimeoutError")
    assert elapsed < 3, elapsed


def test_healthz_reports_a_channel_layer_it_cannot_reach(client, db, settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{closed_port()}/0"]},
        }
    }
    response, body, elapsed = get_health(client)
    assert response.status_code == 503
    assert body["checks"]["channel_layer"]["status"] == "fail"
    assert body["checks"]["broker"]["status"] == "ok"
    assert elapsed < 3, elapsed


def test_a_check_still_stuck_is_not_started_twice(client, db, monkeypatch):
    release = threading.Event()
    calls = []

    def stuck():
        calls.append(1)
        release.wait(10)

    monkeypatch.setitem(health.CRITICAL, "broker", stuck)
    try:
        first = client.get("/healthz").json()
        second = client.get("/healthz").json()
    finally:
        release.set()
    assert first["checks"]["broker"]["error"] == "timeout"
    assert second["checks"]["broker"]["error"] == "busy"
    assert len(calls) == 1


def redis_url() -> str:
    url = os.environ.get("REDIS_URL") or os.environ.get("MARKUS_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:
        pytest.fail(f"Redis is not reachable at {url} ({exc}); start it, or deselect with -m 'not redis'")
    return url


@pytest.mark.redis
def test_healthz_is_ok_with_redis_as_broker_and_channel_layer(client, db, settings):
    url = redis_url()
    settings.CELERY_BROKER_URL = url
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [url]}}
    }
    response, body, elapsed = get_health(client)
    assert response.status_code == 200, body
    assert body["checks"]["broker"] == {"status": "ok", "ms": body["checks"]["broker"]["ms"]}
    assert body["checks"]["channel_layer"]["status"] == "ok"
    assert elapsed < 3


# ---------------------------------------------------------------------------- /metrics


def scrape(client, **extra) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def enqueue(agent, kind, summary):
    return mailbox_enqueue(agent_id=agent.id, source_type=kind, payload={"summary": summary, "content": summary})


@pytest.mark.pg
def test_metrics_show_the_queue_depth_of_an_agent_with_queued_items(client, agent):
    enqueue(agent, T.SYSTEM_EVENT, "one")
    enqueue(agent, T.SYSTEM_EVENT, "two")
    MailboxItem.objects.filter(agent=agent).update(queued_at=timezone.now() - timedelta(seconds=90))
    samples = scrape(client)
    assert value(samples, "markus_queue_depth", agent="ada") == 2
    assert value(samples, "markus_mailbox_items", agent="ada", status="queued") == 2
    assert value(samples, "markus_mailbox_items", agent="ada", status="processing") == 0
    assert value(samples, "markus_queue_oldest_age_seconds", agent="ada") >= 90
    assert value(samples, "markus_agents", kind="internal", status="running") == 1


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_metrics_count_decisions_leases_and_timings_after_the_loop_ran(client, agent):
    set_provider_override(ScriptedProvider(default=Turn(text="done")))
    try:
        enqueue(agent, T.SYSTEM_EVENT, "a job")
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    assert MailboxItem.objects.get(agent=agent).status == "completed"
    samples = scrape(client)
    assert value(samples, "markus_decisions", agent="ada", type="pick") == 1
    assert value(samples, "markus_queue_depth", agent="ada") == 0
    assert value(samples, "markus_mailbox_items", agent="ada", status="completed") == 1
    assert value(samples, "markus_lease_epoch", agent="ada") >= 1
    assert value(samples, "markus_lease_expired", agent="ada") == 0
    assert value(samples, "markus_attention_state", agent="ada", state="idle") == 1
    source = str(T.SYSTEM_EVENT)
    for name in ("markus_item_processing_seconds", "markus_item_wait_seconds"):
        assert value(samples, f"{name}_bucket", source_type=source, le="+Inf") == 1
        assert value(samples, f"{name}_bucket", source_type=source, le="3600.0") == 1
        assert value(samples, f"{name}_gcount", source_type=source) == 1
        assert 0 <= value(samples, f"{name}_gsum", source_type=source) < 60


@pytest.mark.pg
def test_metrics_count_what_recovery_requeued_and_dropped(client, agent):
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hi", "content": "hi"},
        metadata={"senderRole": "user"},
    )
    job = enqueue(agent, T.SYSTEM_EVENT, "a job")
    assert lifecycle.claim_next(agent_id=agent.id).id == chat.id
    assert lifecycle.claim_next(agent_id=agent.id).id == job.id
    report = mailbox_recover(agent.id)  # their worker died
    assert report.requeued == [chat.id] and report.dropped == [job.id]
    samples = scrape(client)
    assert value(samples, "markus_recoveries", agent="ada", outcome="requeued") == 1
    assert value(samples, "markus_recoveries", agent="ada", outcome="dropped") == 1
    assert value(samples, "markus_recoveries", agent="ada", outcome="collapsed") == 0


@pytest.mark.pg
def test_metrics_show_the_outbox_lag(client, db):
    OutboxRecord.objects.create(topic="task.done", schema="s", created_at=timezone.now() - timedelta(seconds=45))
    OutboxRecord.objects.create(topic="task.done", schema="s", status="relayed", relayed_at=timezone.now())
    samples = scrape(client)
    assert value(samples, "markus_outbox_records", status="pending") == 1
    assert value(samples, "markus_outbox_records", status="relayed") == 1
    assert 45 <= value(samples, "markus_outbox_lag_seconds") < 120


def test_metrics_are_refused_to_an_anonymous_remote_caller(client, db):
    response = client.get("/metrics", REMOTE_ADDR=REMOTE)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"markus_" not in response.content


def test_a_forwarded_request_does_not_count_as_local(client, db):
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=REMOTE)
    assert response.status_code == 401


def test_metrics_are_for_staff_not_for_every_user(client, alice, charlie):
    alice.is_staff = True
    alice.save()
    client.force_login(charlie)
    assert client.get("/metrics", REMOTE_ADDR=REMOTE).status_code == 403
    client.force_login(alice)
    assert scrape(client, REMOTE_ADDR=REMOTE) is not None


def test_metrics_take_the_configured_bearer_token(client, db, settings):
    settings.MARKUS = {**settings.MARKUS, "METRICS_TOKEN": "s3cret-token"}
    ok = client.get("/metrics", REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200
    wrong = client.get("/metrics", REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer guess")
    assert wrong.status_code == 401


def test_without_a_configured_token_no_bearer_token_opens_the_metrics(client, db, settings):
    settings.MARKUS = {**settings.MARKUS, "METRICS_TOKEN": ""}
    response = client.get("/metrics", REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer ")
    assert response.status_code == 401
