"""LLM providers: one small interface (see base.py) and its implementations."""

from __future__ import annotations

from .base import LLMCancelled, LLMResponse, Provider, ToolCall, Usage, get_provider

__all__ = ["LLMCancelled", "LLMResponse", "Provider", "ToolCall", "Usage", "get_provider"]
