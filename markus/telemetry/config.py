"""Setting the SDK up from the standard environment variables, once per process.

Tracing is wanted when one of ``OTEL_TRACES_EXPORTER`` (other than ``none``),
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_SERVICE_NAME`` is set and ``OTEL_SDK_DISABLED`` is not ``true``. Everything else
the SDK reads itself: the resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``),
the sampler (``OTEL_TRACES_SAMPLER[_ARG]``), the batch processor (``OTEL_BSP_*``), the
OTLP exporter (``OTEL_EXPORTER_OTLP_*``: endpoint, headers, timeout, compression), the
propagators (``OTEL_PROPAGATORS``) and the Django instrumentation's own variables
(``OTEL_PYTHON_DJANGO_EXCLUDED_URLS`` ...).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

TRIGGERS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
)
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
INSTRUMENTATION_NAME = "markus"


@dataclass
class _State:
    """This process's tracing: ``tracer`` is None while it is off (the helpers' test)."""

    tracer: Any = None
    provider: Any = None
    pid: int | None = None


state = _State()
_lock = threading.Lock()


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Do the environment's ``OTEL_*`` variables ask for traces?"""
    env = os.environ if environ is None else environ
    if _flag(env.get("OTEL_SDK_DISABLED")):
        return False
    exporters = env.get("OTEL_TRACES_EXPORTER")
    if exporters is not None and exporters.strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in TRIGGERS)


def enabled() -> bool:
    return state.tracer is not None


def capture_content() -> bool:
    """Message content (prompts, answers, tool arguments and results) goes on the spans
    only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``."""
    return _flag(os.environ.get(CAPTURE_CONTENT))


def setup(*, exporter: Any = None, set_global: bool = True) -> bool:
    """Install the tracer provider and the Django and Celery instrumentations if the
    environment asks for traces (or ``exporter`` is given: a test's in-memory one, with
    a synchronous processor). Idempotent; True when tracing is on afterwards.

    Called before Django builds its middleware chain (the Django instrumentation
    inserts its middleware into ``settings.MIDDLEWARE``). A forked Celery child inherits
    its parent's provider: the SDK's batch processor restarts its thread after a fork."""
    with _lock:
        if state.tracer is not None:
            return True
        if exporter is None and not wanted():
            return False
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create(_default_resource()))
        if exporter is not None:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            for made in _exporters():
                provider.add_span_processor(BatchSpanProcessor(made))
        if set_global:
            trace.set_tracer_provider(provider)
        _instrument(provider)
        state.provider, state.pid = provider, os.getpid()
        state.tracer = provider.get_tracer(INSTRUMENTATION_NAME)
        log.info("telemetry: traces on (%s)", os.environ.get("OTEL_TRACES_EXPORTER", "otlp"))
        return True


def shutdown() -> None:
    """Flush and turn tracing off again, the instrumentations removed (tests; a process
    that ends flushes through the SDK's own exit hook)."""
    with _lock:
        provider, state.tracer, state.provider, state.pid = state.provider, None, None, None
        if provider is None:
            return
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().uninstrument()
        CeleryInstrumentor().uninstrument()
        provider.shutdown()


def _default_resource() -> dict[str, str]:
    """``service.name`` is ``markus`` unless the environment names it."""
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return {} if named else {"service.name": "markus"}


def _exporters() -> list[Any]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names (default ``otlp``: OTLP over HTTP
    with protobuf, the one transport installed; ``console`` prints the spans)."""
    made: list[Any] = []
    for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(","):
        name = name.strip().lower()
        if name == "otlp":
            protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
            )
            if protocol != "http/protobuf":
                log.warning("telemetry: OTLP protocol %r is not installed; exporting over http/protobuf", protocol)
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            made.append(OTLPSpanExporter())
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            made.append(ConsoleSpanExporter())
        elif name and name != "none":
            log.warning("telemetry: unknown OTEL_TRACES_EXPORTER %r (otlp, console, none)", name)
    return made


def _instrument(provider: Any) -> None:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    DjangoInstrumentor().instrument(tracer_provider=provider)
    CeleryInstrumentor().instrument(tracer_provider=provider)
