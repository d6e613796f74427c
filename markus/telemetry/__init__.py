"""Traces through OpenTelemetry, off unless the standard ``OTEL_*`` variables ask.

``setup()`` (called once per process: markus.asgi, markus.wsgi, and the Celery worker's
init signals in markus.celery) installs the SDK's tracer provider and the official
Django and Celery instrumentations when tracing is wanted (``config.wanted``); when it
is not, nothing of the SDK is set up and every helper here returns at its first line.

The spans the loop makes follow the GenAI semantic conventions (``genai``): one
``invoke_agent {agent}`` span per processed item, parented by the trace of the request
that enqueued it (its W3C ``traceparent`` is kept in the item's marks, ``stamp``), with
a ``plan {agent}`` span for a deliberation or mini triage, a ``chat {model}`` span for
each LLM call and an ``execute_tool {tool}`` span for each tool call beneath it.
"""

from __future__ import annotations

from .config import capture_content, enabled, setup, shutdown, wanted
from .genai import chat_span, focus, item_step, outcome, planned, stamp, tool_span

__all__ = [
    "capture_content",
    "chat_span",
    "enabled",
    "focus",
    "item_step",
    "outcome",
    "planned",
    "setup",
    "shutdown",
    "stamp",
    "tool_span",
    "wanted",
]
