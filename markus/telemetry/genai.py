"""The loop's spans, after the OpenTelemetry GenAI semantic conventions.

- ``invoke_agent {agent}`` (INTERNAL): one processed item. Opened by the loop around
  one step (``item_step``) and started when the loop knows the item (``focus``): its
  parent is the trace the item was enqueued in (the ``traceparent`` mark, ``stamp``),
  linked to the run that processes it (the Celery task's span); without a mark, the
  run's span is its parent. When triage chooses another item than the head the span
  was started for, the chosen one's attributes replace the head's and its trace is
  linked.
- ``plan {agent}`` (INTERNAL): a deliberation or a mini triage (``planned``).
- ``chat {model}`` (CLIENT, INTERNAL for a brain in this process): one LLM call
  (``chat_span``), with its usage and, when opted in, its messages.
- ``execute_tool {tool}`` (INTERNAL): one tool call (``tool_span``), an error status
  when the tool refused or failed.

Every helper returns at once while tracing is off (``config.state.tracer`` is None).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from .config import capture_content, state

TRACEPARENT = "traceparent"
# Provider names the semantic conventions know; any other is ours (``markus.offline``).
KNOWN_PROVIDERS = frozenset({"openai", "anthropic"})

_F = TypeVar("_F", bound=Callable[..., Any])


def provider_name(name: str) -> str:
    return name if name in KNOWN_PROVIDERS else f"markus.{name}"


# ---------------------------------------------------------------------------- propagation


def stamp(marks: dict[str, Any] | None) -> dict[str, Any] | None:
    """``marks`` with the current trace's W3C ``traceparent`` (and ``tracestate``) added,
    for an item being enqueued: its processing, in whichever run, joins this trace.
    Unchanged while tracing is off or no span is current."""
    if state.tracer is None:
        return marks
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return marks
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if TRACEPARENT not in carrier:
        return marks
    return {**(marks or {}), **{k: v for k, v in carrier.items() if k in (TRACEPARENT, "tracestate")}}


def _context_of(marks: dict[str, Any] | None) -> Any:
    """The trace context an item's marks carry, or None."""
    if not marks or not isinstance(marks.get(TRACEPARENT), str):
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {k: marks[k] for k in (TRACEPARENT, "tracestate") if isinstance(marks.get(k), str)}
    context = TraceContextTextMapPropagator().extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


# ---------------------------------------------------------------------------- the item span


@dataclass
class _Step:
    agent_id: str
    agent_name: str
    provider: str
    span: Any = None
    token: Any = None
    item_id: str = ""

    def focus(self, item: Any, batch: Sequence[str] = ()) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        if self.span is None:
            parent = _context_of(getattr(item, "marks", None))
            current = trace.get_current_span().get_span_context()
            links = [trace.Link(current)] if parent is not None and current.is_valid else None
            self.span = state.tracer.start_span(
                f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent",
                context=parent,
                kind=trace.SpanKind.INTERNAL,
                links=links,
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": self.provider,
                    "gen_ai.agent.id": self.agent_id,
                    "gen_ai.agent.name": self.agent_name,
                },
            )
            self.token = otel_context.attach(trace.set_span_in_context(self.span))
        elif item.id != self.item_id:  # triage chose another item than the head
            other = _context_of(getattr(item, "marks", None))
            if other is not None:
                self.span.add_link(trace.get_current_span(other).get_span_context(), {"markus.link": "chosen_item"})
        self.item_id = item.id
        self.span.set_attributes(
            {
                "markus.mailbox.item_id": item.id,
                "markus.mailbox.item_type": str(item.source_type),
                "markus.mailbox.priority": int(item.priority),
            }
        )
        if batch:
            self.span.set_attribute("markus.mailbox.batch", list(batch))

    def end(self, exc: BaseException | None) -> None:
        if self.span is None:
            return
        from opentelemetry import context as otel_context

        if exc is not None:
            _fail(self.span, exc)
        otel_context.detach(self.token)
        self.span.end()


_step: ContextVar[_Step | None] = ContextVar("markus_telemetry_step", default=None)


def item_step(agent_id: str, agent_name: str, *, provider: Callable[[], Any]) -> AbstractContextManager[Any]:
    """One step of the loop: at most one ``invoke_agent`` span, started by ``focus``.
    ``provider``: returns the provider the step calls (asked only while traces are on)."""
    if state.tracer is None:
        return _OFF
    return _item_step(agent_id, agent_name, provider)


@contextmanager
def _item_step(agent_id: str, agent_name: str, provider: Callable[[], Any]) -> Iterator[None]:
    step = _Step(agent_id=agent_id, agent_name=agent_name, provider=provider_name(str(provider().name)))
    token = _step.set(step)
    try:
        yield
    except BaseException as exc:
        step.end(exc)
        raise
    else:
        step.end(None)
    finally:
        _step.reset(token)


def focus(item: Any, *, batch: Sequence[str] = ()) -> None:
    """The step is about ``item`` (the head before triage, the begun item after)."""
    if state.tracer is None:
        return
    step = _step.get()
    if step is not None:
        step.focus(item, batch)


def outcome(kind: str, detail: str = "") -> None:
    """How the item's processing ended (``completed``, ``retry``, ``parked`` ...); a
    retry after a failure marks the span as an error."""
    if state.tracer is None:
        return
    step = _step.get()
    if step is None or step.span is None:
        return
    step.span.set_attribute("markus.outcome", kind)
    if kind == "retry":
        from opentelemetry.trace import Status, StatusCode

        step.span.set_attribute("error.type", "retry")
        step.span.set_status(Status(StatusCode.ERROR, detail or "retry"))


# ---------------------------------------------------------------------------- plan


def planned(kind: str) -> Callable[[_F], _F]:
    """A decorator: the function is a planning phase (``deliberation``, ``mini_triage``)
    and gets its ``plan {agent}`` span."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if state.tracer is None:
                return fn(*args, **kwargs)
            from opentelemetry import trace

            step = _step.get()
            name = step.agent_name if step is not None else ""
            attributes: dict[str, Any] = {"gen_ai.operation.name": "plan", "markus.plan.kind": kind}
            if step is not None:
                attributes |= {"gen_ai.agent.id": step.agent_id, "gen_ai.agent.name": step.agent_name}
            with state.tracer.start_as_current_span(
                f"plan {name}" if name else "plan", kind=trace.SpanKind.INTERNAL, attributes=attributes
            ) as span:
                result = fn(*args, **kwargs)
                span.set_attribute("markus.plan.result", type(result).__name__ if result is not None else "head")
                return result

        return traced  # type: ignore[return-value]

    return wrap


# ---------------------------------------------------------------------------- chat


class _Call:
    """What a ``chat_span`` block tells about the answer."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def judged(self, word: str, usage: Any) -> None:
        """The interrupt judge's answer: one word, and what it spent if the provider said."""
        if self.span is None:
            return
        self._usage(usage)
        if capture_content():
            self.span.set_attribute(
                "gen_ai.output.messages", _json([{"role": "assistant", "parts": [{"type": "text", "content": word}]}])
            )

    def answered(self, response: Any) -> None:
        if self.span is None:
            return
        self._usage(getattr(response, "usage", None))
        reason = str(getattr(response, "finish_reason", "") or "")
        if reason:
            self.span.set_attribute("gen_ai.response.finish_reasons", [reason])
        if capture_content():
            self.span.set_attribute("gen_ai.output.messages", _json([_output_message(response, reason)]))

    def _usage(self, usage: Any) -> None:
        if usage is not None:
            self.span.set_attribute("gen_ai.usage.input_tokens", int(getattr(usage, "prompt_tokens", 0) or 0))
            self.span.set_attribute("gen_ai.usage.output_tokens", int(getattr(usage, "completion_tokens", 0) or 0))
            cached = getattr(usage, "cached", None)
            if cached:
                self.span.set_attribute("gen_ai.usage.cache_read.input_tokens", int(cached))


def chat_span(
    provider: Any,
    *,
    system: str,
    messages: list[dict[str, Any]],
    context: Any,
    operation: str = "chat",
) -> AbstractContextManager[Any]:
    """One LLM call through ``provider`` (its ``name`` and ``model``, or the call's
    ``context.model``). Yields a ``_Call``: ``answered(response)`` records the usage."""
    if state.tracer is None:
        return _OFF
    return _chat_span(provider, system, messages, context, operation)


@contextmanager
def _chat_span(
    provider: Any, system: str, messages: list[dict[str, Any]], context: Any, operation: str
) -> Iterator[_Call]:
    from opentelemetry import trace

    model = str(getattr(context, "model", "") or getattr(provider, "model", "") or getattr(provider, "name", ""))
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider_name(str(getattr(provider, "name", "unknown"))),
        "gen_ai.request.model": model,
    }
    scenario = str(getattr(context, "scenario", "") or "")
    if scenario:
        attributes["markus.scenario"] = scenario
    agent = str(getattr(context, "agent_name", "") or "")
    if agent:
        attributes["gen_ai.agent.name"] = agent
    if capture_content():
        if system:
            attributes["gen_ai.system_instructions"] = _json([{"type": "text", "content": system}])
        attributes["gen_ai.input.messages"] = _json([_input_message(m) for m in messages])
    kind = trace.SpanKind.INTERNAL if getattr(provider, "local", False) else trace.SpanKind.CLIENT
    span = state.tracer.start_span(f"{operation} {model}", kind=kind, attributes=attributes)
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield _Call(span)
        except BaseException as exc:
            _fail(span, exc)
            raise


# ---------------------------------------------------------------------------- tools


class _ToolRun:
    def __init__(self, span: Any) -> None:
        self.span = span

    def result(self, ok: bool, text: str) -> None:
        if self.span is None:
            return
        if capture_content():
            self.span.set_attribute("gen_ai.tool.call.result", text)
        if not ok:
            from opentelemetry.trace import Status, StatusCode

            self.span.set_attribute("error.type", "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, _error_of(text)))


def tool_span(name: str, call_id: str, arguments: Any) -> AbstractContextManager[Any]:
    """One tool call; ``result(ok, text)`` records how it ended."""
    if state.tracer is None:
        return _OFF
    return _tool_span(name, call_id, arguments)


@contextmanager
def _tool_span(name: str, call_id: str, arguments: Any) -> Iterator[_ToolRun]:
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    if capture_content():
        attributes["gen_ai.tool.call.arguments"] = arguments if isinstance(arguments, str) else _json(arguments)
    span = state.tracer.start_span(f"execute_tool {name}", kind=trace.SpanKind.INTERNAL, attributes=attributes)
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield _ToolRun(span)
        except BaseException as exc:
            _fail(span, exc)
            raise


# ---------------------------------------------------------------------------- helpers


class _Off:
    """What the span helpers hand out while traces are off: one shared object whose
    block and recorders do nothing (no generator, no allocation per call)."""

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def answered(self, response: Any) -> None:
        pass

    def judged(self, word: str, usage: Any) -> None:
        pass

    def result(self, ok: bool, text: str) -> None:
        pass


_OFF = _Off()


def _fail(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def _error_of(text: str) -> str:
    try:
        parsed = json.loads(text)
    except (TypeError, ValueError):
        return text[:200]
    return str(parsed.get("error", text))[:200] if isinstance(parsed, dict) else text[:200]


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _input_message(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped message (the loop's session) as the conventions' message parts."""
    role = str(message.get("role", "user"))
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "result": message.get("content")}
        )
        return {"role": role, "parts": parts}
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append(
            {"type": "tool_call", "id": call.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")}
        )
    return {"role": role, "parts": parts}


def _output_message(response: Any, reason: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if getattr(response, "text", ""):
        parts.append({"type": "text", "content": response.text})
    for call in getattr(response, "tool_calls", None) or []:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if reason:
        message["finish_reason"] = reason
    return message
