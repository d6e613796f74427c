"""The ``anthropic`` provider: the official SDK (the Messages API), with tool use and
streaming, selected and configured by the same settings as ``openai`` (provider,
model, base URL, key).

Sessions keep the OpenAI chat shape (base.py); this module translates: the system
prompt goes in ``system``, an assistant turn's tool calls become ``tool_use`` blocks,
tool results become ``tool_result`` blocks in a user turn, and consecutive turns of one
role are merged (the API wants user and assistant to alternate)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
from anthropic.types import Message

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

DEFAULT_MODEL = "claude-sonnet-5-5"
MAX_TOKENS = 4096


def wire_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function schemas → Anthropic tool definitions."""
    wire = []
    for t in tools:
        fn = t.get("function", t)
        wire.append(
            {
                "name": fn["name"],
                "description": fn.get("description") or "",
                "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return wire


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    text = str(content or "")
    return [{"type": "text", "text": text}] if text.strip() else []


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-shaped session messages → Anthropic messages (alternating roles)."""
    wire: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            blocks = _blocks(m.get("content"))
            for call in m.get("tool_calls") or []:
                args = call["function"]["arguments"]
                if isinstance(args, str):
                    try:
                        args = json.loads(args or "{}")
                    except json.JSONDecodeError:
                        args = {"_raw": args}
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": args})
            wire_role = "assistant"
        elif role == "tool":
            blocks = [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": str(m.get("content") or "")}]
            wire_role = "user"
        else:  # user, and anything else a session may hold, is the user's side
            blocks = _blocks(m.get("content"))
            wire_role = "user"
        if not blocks:
            continue
        if wire and wire[-1]["role"] == wire_role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": wire_role, "content": blocks})
    if not wire or wire[0]["role"] != "user":  # the API opens with a user turn
        wire.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continue)"}]})
    return wire


def _usage(usage: Any) -> Usage:
    prompt = sum(
        getattr(usage, key, 0) or 0
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=getattr(usage, "output_tokens", 0) or 0,
        cached=getattr(usage, "cache_read_input_tokens", 0) or 0,
    )


def _from_message(message: Message) -> LLMResponse:
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [
        ToolCall(id=b.id, name=b.name, arguments=dict(b.input) if isinstance(b.input, dict) else {"_raw": b.input})
        for b in message.content
        if b.type == "tool_use"
    ]
    reason = message.stop_reason or ""
    return LLMResponse(
        text=text,
        tool_calls=calls,
        usage=_usage(message.usage),
        finish_reason=reason,
        refusal=refusal_of(reason, getattr(message, "stop_details", None)),
    )


def refusal_of(stop_reason: str, details: Any) -> str:
    """``LLMResponse.refusal`` on this wire: ``stop_reason: "refusal"`` (a streaming
    classifier stopped the answer), with the category and explanation of its
    ``stop_details`` when the server gave them."""
    if stop_reason != "refusal":
        return ""
    category = getattr(details, "category", None)
    explanation = getattr(details, "explanation", None)
    said = "refusal" + (f", {category}" if category else "")
    return said + (f": {explanation}" if explanation else "")


def _arguments(raw: str) -> dict[str, Any]:
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_raw": raw}
    return args if isinstance(args, dict) else {"_raw": raw}


def _from_stream(stream: Any, watch: CancelWatch, context: CallContext) -> LLMResponse:
    """message_start (input usage), content blocks (text deltas go to
    ``context.on_delta``; a tool_use block's input arrives as partial JSON),
    message_delta (output usage), message_stop."""
    text: list[str] = []
    blocks: dict[int, dict[str, Any]] = {}
    prompt = completion = cached = 0
    reason = ""
    details = None
    looping = Repetition()
    for event in stream:
        watch.check()
        kind = event.type
        if kind == "message_start":
            usage = _usage(event.message.usage)
            prompt, completion, cached = usage.prompt_tokens, usage.completion_tokens, usage.cached
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
            elif block.type == "text" and block.text:
                text.append(block.text)
                context.emit(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                text.append(delta.text)
                context.emit(delta.text)
                if looping.feed(delta.text):
                    return repeating("".join(text)[: looping.kept], looping, prompt)
            elif delta.type == "input_json_delta" and event.index in blocks:
                blocks[event.index]["json"] += delta.partial_json
        elif kind == "message_delta":
            reason = getattr(event.delta, "stop_reason", None) or reason
            details = getattr(event.delta, "stop_details", None) or details
            if event.usage is not None:  # a server may leave it out; the stop reason still counts
                usage = _usage(event.usage)  # cumulative; input counts only if the server repeats them
                prompt = max(prompt, usage.prompt_tokens)
                completion = max(completion, usage.completion_tokens)
                cached = max(cached, usage.cached)
    watch.check()
    if not reason:
        raise cut_short("anthropic")
    return LLMResponse(
        text="".join(text),
        tool_calls=[
            ToolCall(id=b["id"], name=b["name"], arguments=_arguments(b["json"])) for _, b in sorted(blocks.items())
        ],
        usage=Usage(prompt_tokens=prompt, completion_tokens=completion, cached=cached),
        finish_reason=reason,
        refusal=refusal_of(reason, details),
    )


def cached_system(system: str) -> list[dict[str, Any]]:
    """The system prompt as one block marked for the prompt cache: the stable part of a
    request (the role, the rules and, before them on the wire, the tools) is read from
    the cache by every later call that starts the same way."""
    return [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]


def cache_last_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire messages with a cache breakpoint on the last block of the last message:
    the next turn of the same session reads everything up to there from the cache."""
    if messages and messages[-1]["content"]:
        last = dict(messages[-1]["content"][-1])
        last["cache_control"] = {"type": "ephemeral"}
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"][:-1], last]}
    return messages


class AnthropicProvider(Provider):
    name = "anthropic"
    judges = True
    triages = True

    def __init__(
        self, *, model: str, base_url: str | None, api_key: str, timeout: float = 120.0, max_tokens: int = MAX_TOKENS
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        # The seam (attention.model_call) tries again with back-off: the SDK does not.
        self.client = anthropic.Anthropic(
            base_url=base_url, api_key=api_key, timeout=anthropic.Timeout(timeout), max_retries=0
        )

    @classmethod
    def configured(cls, *, model: str, base_url: str, api_key: str, timeout: float) -> Provider:
        return cls(model=model or DEFAULT_MODEL, base_url=base_url or None, api_key=api_key or "unset", timeout=timeout)

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        """Always streamed, so a pause closes the connection mid-answer; a server that
        answers a whole JSON message instead of an event stream is read as one. Laid out
        for the prompt cache: breakpoints after the system prompt (the tools come before
        it on the wire) and after the last message."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": context.max_tokens or self.max_tokens,
            "system": cached_system(system),
            "messages": cache_last_turn(wire_messages(messages)),
            "stream": True,
        }
        if tools:
            kwargs["tools"] = wire_tools(tools)
        try:
            return streamed_call(
                context,
                lambda: self.client.messages.create(**kwargs),
                lambda body: _from_message(Message.construct(**json.loads(body))),
                lambda stream, watch: _from_stream(stream, watch, context),
            )
        except sdk_errors(anthropic) as exc:
            raise provider_error(exc, anthropic) from exc

    def _ask(self, prompt: str, max_tokens: int, context: CallContext | None = None) -> str:
        try:
            message = self.client.messages.create(
                model=self.model, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
            )
        except sdk_errors(anthropic) as exc:
            raise provider_error(exc, anthropic) from exc
        if context is not None:
            context.usage = _usage(message.usage)
        return "".join(b.text for b in message.content if b.type == "text")

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        prompt = judge_prompt(current, new)
        word = self._ask(prompt, 5, context).strip().lower().split()
        return word[0].strip(".,!") if word else "continue"
