"""The default prices (read by the settings: this module imports nothing)."""

from __future__ import annotations

# USD per million tokens: input, output, cached input (the public list prices).
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "offline": {"input": 0, "output": 0, "cachedInput": 0},
    "scripted": {"input": 0, "output": 0, "cachedInput": 0},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60, "cachedInput": 0.075},
    "gpt-4o": {"input": 2.50, "output": 10.00, "cachedInput": 1.25},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40, "cachedInput": 0.025},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60, "cachedInput": 0.10},
    "gpt-4.1": {"input": 2.00, "output": 8.00, "cachedInput": 0.50},
    "gpt-5-mini": {"input": 0.25, "output": 2.00, "cachedInput": 0.025},
    "gpt-5": {"input": 1.25, "output": 10.00, "cachedInput": 0.125},
    "o4-mini": {"input": 1.10, "output": 4.40, "cachedInput": 0.275},
    "claude-3-5-haiku": {"input": 0.80, "output": 4.00, "cachedInput": 0.08},
    "claude-haiku-4": {"input": 1.00, "output": 5.00, "cachedInput": 0.10},
    "claude-sonnet-4": {"input": 3.00, "output": 15.00, "cachedInput": 0.30},
    "claude-3-7-sonnet": {"input": 3.00, "output": 15.00, "cachedInput": 0.30},
    "claude-opus-4": {"input": 15.00, "output": 75.00, "cachedInput": 1.50},
}
