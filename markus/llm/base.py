"""The provider interface: given a system prompt, messages and tool schemas, return text,
tool calls and token usage.

Messages use the OpenAI chat shape (``role`` user / assistant / tool, ``tool_calls`` on
assistant turns, ``tool_call_id`` on tool results), because it is plain JSON and is what
gets persisted in an LLM session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

COMPLETION_MARKER = "<<HANDLE_COMPLETE>>"


class LLMCancelled(Exception):
    """The in-flight call was cancelled (the agent was stopped or paused)."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class LLMResponse:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


@dataclass
class CallContext:
    """What the loop knows about the call; the offline brain reads it, real providers
    ignore it. ``cancelled`` is polled by providers that can stop mid-call."""

    scenario: str = ""
    agent_name: str = ""
    item: dict[str, Any] = field(default_factory=dict)
    cancelled: Callable[[], bool] = lambda: False


class Provider:
    name = "base"
    #: Whether a call is answered in this process without waiting on anything (no
    #: network, no sleep): the loop then keeps no lease-renewing thread during it.
    local = False
    #: Whether this provider can act as the LLM interrupt judge.
    judges = False

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        raise NotImplementedError

    #: Whether this provider can triage competing items (seed section 21, tier 1).
    triages = False

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        """One word: continue / preempt / cancel / merge / defer."""
        return "continue"

    def triage(self, *, candidates: list[dict[str, Any]], context: CallContext) -> dict[str, Any]:
        """Given items of equal priority (oldest first), answer
        ``{processItemId, deferItemIds, dropItemIds, reasoning}``."""
        return {"processItemId": candidates[0]["id"], "deferItemIds": [], "dropItemIds": [], "reasoning": ""}


_override: Provider | None = None


def set_provider_override(provider: Provider | None) -> None:
    """Tests install a scripted provider for the worker threads of this process."""
    global _override
    _override = provider


# Providers built from the settings, one per process for each distinct configuration:
# building one (an SDK client with its connection pool) per call cost more than the
# call to the offline brain, and on every mind-view render.
_built: dict[tuple[str, ...], Provider] = {}
_built_lock = threading.Lock()


def _configuration() -> tuple[str, ...]:
    m = settings.MARKUS
    return (
        str(m["LLM_PROVIDER"]),
        str(m["LLM_MODEL"] or ""),
        str(m["LLM_BASE_URL"] or ""),
        str(m["LLM_API_KEY"] or ""),
    )


def _build(name: str, model: str, base_url: str, api_key: str) -> Provider:
    if name == "offline":
        from .offline import OfflineProvider

        return OfflineProvider()
    if name == "openai":
        from .openai_provider import OpenAIProvider

        return OpenAIProvider(model=model or "gpt-4o-mini", base_url=base_url or None, api_key=api_key or "unset")
    raise ValueError(f"unknown MARKUS_LLM_PROVIDER {name!r} (offline, openai)")


def get_provider() -> Provider:
    """The configured provider: built once per process for its settings (provider,
    model, base URL, key) and shared by every thread; a change of those settings builds
    a new one. A test's override wins."""
    if _override is not None:
        return _override
    key = _configuration()
    provider = _built.get(key)
    if provider is None:
        with _built_lock:
            provider = _built.get(key)
            if provider is None:
                if len(_built) >= 16:  # settings changed many times (tests): drop the old ones
                    _built.clear()
                provider = _built[key] = _build(*key)
    return provider
