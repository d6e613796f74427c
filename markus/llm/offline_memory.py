"""The offline brain's dream cycle: it consolidates deterministically. The dream item
lists the new observations as ``[obs ID ×COUNT] text``; observations that say the same
thing (case, spacing, a bullet and the final punctuation aside) are merged into one, and
the most repeated (seen at least twice) are promoted into MEMORY.md's section
"Recurring observations". One ``memory_consolidate`` call, then a summary."""

from __future__ import annotations

import json
import re
from typing import Any

from .offline_plan import LABEL, FinalFn, PlanFn, Step

DREAM_CYCLE = "dream_cycle"
SECTION = "Recurring observations"
PROMOTE_TOP = 5
_LINE = re.compile(r"^\[obs (\d+)(?: ×(\d+))?\] (.+)$")


def _normalized(text: str) -> str:
    text = re.sub(r"^\s*[-*•]\s+", "", text)
    return " ".join(text.casefold().split()).rstrip(".!;,")


def consolidation(content: str) -> dict[str, Any]:
    """The memory_consolidate arguments for a dream item's listing."""
    groups: dict[str, list[tuple[int, int, str]]] = {}
    for line in content.splitlines():
        m = _LINE.match(line.strip())
        if m:
            obs_id, count, text = int(m.group(1)), int(m.group(2) or 1), m.group(3).strip()
            groups.setdefault(_normalized(text), []).append((obs_id, count, text))
    merge = [{"ids": [g[0] for g in group], "text": group[0][2]} for group in groups.values() if len(group) > 1]
    repeated = sorted(
        (group for group in groups.values() if sum(g[1] for g in group) > 1),
        key=lambda group: (-sum(g[1] for g in group), group[0][0]),
    )[:PROMOTE_TOP]
    promote = [{"section": SECTION, "text": f"- {group[0][2]}"} for group in repeated]
    return {"remove": [], "merge": merge, "promote": promote}


def plan(item: dict[str, Any], agent: str) -> list[Step]:
    return [("memory_consolidate", consolidation(str(item.get("content") or "")))]


def final(item: dict[str, Any], agent: str, results: dict[str, str]) -> str:
    try:
        done = json.loads(results.get("memory_consolidate") or "{}")
    except json.JSONDecodeError:
        done = {}
    if not isinstance(done, dict) or "error" in done or "merged" not in done:
        reason = done.get("error") if isinstance(done, dict) else None
        return f"{agent} could not consolidate memory ({LABEL}): {reason or 'nothing was applied'}."
    return (
        f"Dream cycle ({LABEL}): merged {done['merged']} duplicate observation(s), promoted "
        f"{done['promoted']} recurring one(s) into MEMORY.md ({done.get('alreadyKnown', 0)} already there), "
        f"removed {done['removed']}."
    )


# What the offline brain (``markus.llm.offline``) reads of this area.
PLANS: dict[str, PlanFn] = {DREAM_CYCLE: plan}
FINALS: dict[str, FinalFn] = {DREAM_CYCLE: final}
