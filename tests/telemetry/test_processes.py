"""Each process sets traces up once: a Celery worker on its init signals (markus.celery),
and requests that come in through ASGI (daphne's path) get their server span too."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from celery import signals
from django.test import AsyncClient
from opentelemetry.trace import SpanKind

import markus.celery  # noqa: F401 (connects the worker signals)
from markus import telemetry


@pytest.mark.parametrize("signal", [signals.worker_init, signals.worker_process_init])
def test_a_worker_process_sets_traces_up_when_otel_asks(no_otel_env, monkeypatch, signal):
    signal.send(sender=None)
    assert not telemetry.enabled()  # no OTEL_* variable: nothing
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    try:
        signal.send(sender=None)
        assert telemetry.enabled()
        signal.send(sender=None)  # once per process: a second signal changes nothing
        assert telemetry.enabled()
    finally:
        telemetry.shutdown()


@pytest.mark.django_db
def test_a_request_through_asgi_is_a_server_span(spans):
    response = async_to_sync(AsyncClient().get)("/healthz")
    assert response.status_code in (200, 503)
    [server] = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert server.name == "GET healthz"
