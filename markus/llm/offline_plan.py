"""What a plan of the offline brain is, shared by ``markus.llm.offline`` and the areas'
plans it reads (``offline_deliberation``, ``offline_memory``, ``offline_reports``): a
step, a plan, a final text, and the label its every text carries. The areas import this,
the brain imports the areas: nothing imports back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LABEL = "offline brain (rule-based, no language model)"

Step = tuple[str, dict[str, Any]]
# A plan: (the item's brief, the agent's name) → the tool steps; a final: (the brief, the
# agent's name, tool name → its latest result) → the final text.
PlanFn = Callable[[dict[str, Any], str], list[Step]]
FinalFn = Callable[[dict[str, Any], str, dict[str, str]], str]
