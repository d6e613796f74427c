"""LLM providers: one small interface (see base.py) and its implementations."""

from __future__ import annotations

from .base import CallContext, LLMCancelled, LLMResponse, Provider, ProviderError, ToolCall, Usage, get_provider

__all__ = [
    "CallContext",
    "LLMCancelled",
    "LLMResponse",
    "Provider",
    "ProviderError",
    "ToolCall",
    "Usage",
    "get_provider",
]
