"""Traces are configured by the standard OTEL_* variables and off when none is set:
then no SDK is set up, no instrumentation is installed and items carry no trace mark."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.conf import settings
from opentelemetry import trace
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider

from attention.loop import run_attention
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus import telemetry
from markus.telemetry.config import state

OTEL_MIDDLEWARE = "opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_SERVICE_NAME": "markus-prod"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_SERVICE_NAME": "markus-prod"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, False),  # content alone is no exporter
    ],
)
def test_traces_are_wanted_only_when_an_otel_variable_asks(env, on):
    assert telemetry.wanted(env) is on


@pytest.mark.django_db
def test_without_otel_variables_no_sdk_is_set_up_and_items_carry_no_trace(no_otel_env, agent):
    assert telemetry.setup() is False
    assert not telemetry.enabled() and state.provider is None
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)  # still the API's no-op proxy
    assert not DjangoInstrumentor().is_instrumented_by_opentelemetry
    assert not CeleryInstrumentor().is_instrumented_by_opentelemetry
    assert OTEL_MIDDLEWARE not in settings.MIDDLEWARE
    item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"content": "hello"})
    assert "traceparent" not in MailboxItem.objects.get(id=item.id).marks
    assert item.id in run_attention(agent.id).items
    assert state.tracer is None


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector: keeps every ExportTraceServiceRequest it is sent."""

    received: list[tuple[str, ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", _Collector.received
    server.shutdown()
    server.server_close()


@pytest.mark.django_db
def test_an_otlp_endpoint_in_the_environment_exports_the_loops_spans_there(no_otel_env, monkeypatch, collector, agent):
    endpoint, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "markus-test")
    try:
        assert telemetry.setup(set_global=False) is True
        assert DjangoInstrumentor().is_instrumented_by_opentelemetry
        assert OTEL_MIDDLEWARE in settings.MIDDLEWARE
        item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"content": "hello"})
        assert item.id in run_attention(agent.id).items
        assert state.provider.force_flush()
    finally:
        telemetry.shutdown()
    assert OTEL_MIDDLEWARE not in settings.MIDDLEWARE
    assert received and {path for path, _ in received} == {"/v1/traces"}
    resources = [rs for _, r in received for rs in r.resource_spans]
    service = {a.value.string_value for rs in resources for a in rs.resource.attributes if a.key == "service.name"}
    assert service == {"markus-test"}
    names = [s.name for rs in resources for ss in rs.scope_spans for s in ss.spans]
    assert "invoke_agent Ada" in names and "chat offline" in names
