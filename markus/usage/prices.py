"""What a call cost: the prices per million tokens of ``MARKUS["PRICES"]`` (input,
output, cached input; USD), looked up by the model's name or its longest known prefix
(``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``). A model not in the table
costs nothing (its tokens still count against a token budget)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings

from markus.llm.base import Usage

MILLION = Decimal(1_000_000)


def price_of(model: str) -> dict[str, Any] | None:
    """The prices of ``model`` (exact name, else the longest prefix in the table)."""
    table: dict[str, dict[str, Any]] = settings.MARKUS["PRICES"]
    if model in table:
        return table[model]
    known = [name for name in table if model.startswith(name)]
    return table[max(known, key=len)] if known else None


def cost_of(model: str, usage: Usage) -> Decimal:
    """USD: uncached input at the input price, cached input at the cached price (the
    input price when none is given), output at the output price."""
    price = price_of(model)
    if price is None:
        return Decimal(0)
    cached = min(usage.cached, usage.prompt_tokens)
    per_input = Decimal(str(price.get("input", 0)))
    per_cached = Decimal(str(price.get("cachedInput", price.get("input", 0))))
    per_output = Decimal(str(price.get("output", 0)))
    total = (usage.prompt_tokens - cached) * per_input + cached * per_cached + usage.completion_tokens * per_output
    return (total / MILLION).quantize(Decimal("0.000001"))
