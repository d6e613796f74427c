"""The ``openai`` provider: the official SDK with a configurable base URL, which covers
OpenAI and every OpenAI-compatible server (Ollama, vLLM, llama.cpp, gateways)."""

from __future__ import annotations

import json
from typing import Any

from .base import CallContext, LLMResponse, Provider, ToolCall, Usage


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


class OpenAIProvider(Provider):
    name = "openai"
    judges = True

    def __init__(self, *, model: str, base_url: str | None, api_key: str, timeout: float = 120.0) -> None:
        import openai

        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=1)

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        kwargs: dict[str, Any] = {"model": self.model, "messages": _wire_messages(system, messages)}
        if tools:
            kwargs["tools"] = tools
        response = self.client.chat.completions.create(**kwargs)
        choice = response.choices[0].message
        calls = []
        for c in choice.tool_calls or []:
            try:
                args = json.loads(c.function.arguments or "{}")
            except json.JSONDecodeError:
                args = {"_raw": c.function.arguments}
            calls.append(ToolCall(id=c.id, name=c.function.name, arguments=args))
        usage = response.usage
        return LLMResponse(
            text=choice.content or "",
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            ),
        )

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        prompt = (
            "You are deciding whether to interrupt your current work for a new message. "
            "Answer with exactly one word: continue, preempt, cancel, merge or defer.\n\n"
            f"Current work: {json.dumps(current)[:2000]}\n\nNew message: {json.dumps(new)[:2000]}"
        )
        response = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": prompt}], max_tokens=3
        )
        word = (response.choices[0].message.content or "").strip().lower().split()
        return word[0].strip(".,!") if word else "continue"

    triages = True

    def triage(self, *, candidates: list[dict[str, Any]], context: CallContext) -> dict[str, Any]:
        prompt = (
            f"You are {context.agent_name}. These mailbox items have the same priority; decide which to "
            "handle now, which to defer and which are stale or redundant and can be dropped. Answer with "
            'JSON only: {"processItemId": "...", "deferItemIds": [], "dropItemIds": [], "reasoning": "..."}'
            f"\n\n{json.dumps(candidates)[:8000]}"
        )
        response = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            response_format={"type": "json_object"},
        )
        text = response.choices[0].message.content or "{}"
        try:
            answer = json.loads(text[text.find("{") : text.rfind("}") + 1])
        except json.JSONDecodeError:
            return {"processItemId": candidates[0]["id"], "reasoning": "unreadable triage answer"}
        return answer if isinstance(answer, dict) else {"processItemId": candidates[0]["id"]}
