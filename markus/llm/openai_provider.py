"""The ``openai`` provider: the official SDK with a configurable base URL, which covers
OpenAI and every OpenAI-compatible server (Ollama, vLLM, llama.cpp, gateways)."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from .base import (
    CallContext,
    CancelWatch,
    LLMResponse,
    Provider,
    Repetition,
    ToolCall,
    Usage,
    cut_short,
    judge_prompt,
    provider_error,
    repeating,
    sdk_errors,
    streamed_call,
)
from .reasoning import ReasoningFilter, without_reasoning


def _wire_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**c, "function": {"name": c["function"]["name"], "arguments": json.dumps(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
        wire.append(m)
    return wire


def _arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """A call's arguments: the string of a JSON object, as the wire says; an object as it
    is (some servers send one); anything else kept raw, for the tool to refuse."""
    if isinstance(raw, dict):
        return raw
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_raw": raw}
    return args if isinstance(args, dict) else {"_raw": raw}


def _usage(usage: Any) -> Usage:
    """The SDK's usage; the cached part of the prompt is ``prompt_tokens_details.cached_tokens``
    (a dict when the body was read whole with ``construct``)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", 0)
    return Usage(
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cached=cached or 0,
    )


def _from_completion(response: ChatCompletion) -> LLMResponse:
    choice = response.choices[0].message
    calls = []
    for c in choice.tool_calls or []:
        fn: Any = getattr(c, "function", None)  # a custom (non-function) tool call has none
        if fn is not None:
            calls.append(ToolCall(id=c.id, name=fn.name, arguments=_arguments(fn.arguments)))
    reason = response.choices[0].finish_reason or ""
    return LLMResponse(
        text=without_reasoning(choice.content or ""),
        tool_calls=calls,
        usage=_usage(response.usage),
        finish_reason=reason,
        refusal=refusal_of(reason, choice.refusal or ""),
    )


def refusal_of(finish_reason: str, said: str) -> str:
    """``LLMResponse.refusal`` on this wire: the model's refusal message (structured
    outputs answer one in ``refusal``, not in the content), or a stop by the content
    filter."""
    if said:
        return f"refusal: {said.strip()}"
    return finish_reason if finish_reason == "content_filter" else ""


def _from_stream(stream: Any, watch: CancelWatch, context: CallContext) -> LLMResponse:
    """Text deltas go to ``context.on_delta`` as they come, a reasoning model's thinking
    left out (``markus.llm.reasoning``); tool calls are assembled from their pieces (by
    index: the id and name come first, the arguments in parts)."""
    text: list[str] = []
    refused: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = Usage()
    reason = ""
    answer = ReasoningFilter(context.emit)
    looping = Repetition()
    for chunk in stream:
        watch.check()
        if chunk.usage is not None:
            usage = _usage(chunk.usage)
        for choice in chunk.choices:
            reason = choice.finish_reason or reason
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
                answer.feed(delta.content)
                if looping.feed(delta.content):
                    return repeating(without_reasoning("".join(text)[: looping.kept]), looping)
            if getattr(delta, "refusal", None):
                refused.append(delta.refusal)
            for piece in delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                if piece.id:
                    call["id"] = piece.id
                if piece.function is not None:
                    call["name"] += piece.function.name or ""
                    part: Any = piece.function.arguments or ""
                    call["arguments"] = part if isinstance(part, dict) else call["arguments"] + part
    watch.check()
    if not reason:
        raise cut_short("openai")
    answer.end()
    return LLMResponse(
        text=without_reasoning("".join(text)),
        tool_calls=[
            ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=_arguments(c["arguments"]))
            for i, c in sorted(calls.items())
        ],
        usage=usage,
        finish_reason=reason,
        refusal=refusal_of(reason, "".join(refused)),
    )


class OpenAIProvider(Provider):
    name = "openai"
    judges = True

    def __init__(self, *, model: str, base_url: str | None, api_key: str, timeout: float = 120.0) -> None:
        self.model = model
        # The seam (attention.model_call) tries again with back-off: the SDK does not.
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=openai.Timeout(timeout), max_retries=0)

    @classmethod
    def configured(cls, *, model: str, base_url: str, api_key: str, timeout: float) -> Provider:
        return cls(model=model or "gpt-4o-mini", base_url=base_url or None, api_key=api_key or "unset", timeout=timeout)

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        """Always streamed (``stream=True``, usage in the last chunk), so a pause closes
        the connection mid-answer; a server that answers a whole JSON completion instead
        of an event stream is read as one. A stream that ends without a finish reason,
        and every SDK error, is a ``ProviderError``."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": _wire_messages(system, messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if context.max_tokens:
            kwargs["max_tokens"] = context.max_tokens
        if tools:
            kwargs["tools"] = tools
        try:
            return streamed_call(
                context,
                lambda: self.client.chat.completions.create(**kwargs),
                lambda body: _from_completion(ChatCompletion.construct(**json.loads(body))),
                lambda stream, watch: _from_stream(stream, watch, context),
            )
        except sdk_errors(openai) as exc:
            raise provider_error(exc, openai) from exc

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        prompt = judge_prompt(current, new)
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}], max_tokens=3
            )
        except sdk_errors(openai) as exc:
            raise provider_error(exc, openai) from exc
        context.usage = _usage(response.usage)
        word = (response.choices[0].message.content or "").strip().lower().split()
        return word[0].strip(".,!") if word else "continue"

    #: The mini triage asks through ``complete`` (attention.triage): any chat model can.
    triages = True
