"""Traces into the SDK's in-memory exporter: the tracer provider, the Django and the
Celery instrumentations are installed for the test (not as the process's global
provider) and removed after it."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from markus import telemetry
from markus.telemetry.config import CAPTURE_CONTENT, TRIGGERS


@pytest.fixture
def no_otel_env(monkeypatch):
    """None of the OTEL_* variables that turn traces on, whatever the shell had."""
    for name in (*TRIGGERS, "OTEL_SDK_DISABLED", CAPTURE_CONTENT):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def spans(no_otel_env):
    exporter = InMemorySpanExporter()
    assert telemetry.setup(exporter=exporter, set_global=False)
    yield exporter
    telemetry.shutdown()


@pytest.fixture
def content_on(monkeypatch):
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
