"""The offline brain's triage and deliberation (seed section 21), deterministic.

Both look at the candidates' briefs (``attention.triage.candidate_brief``: id, type,
priority, summary, content, task/requirement, ``queuedAt``, ``ageSeconds``,
``periodic``; a deliberation's also ``protected``, ``strict``, ``informational``; a
mini triage's ``stale``) and apply, in order:

1. a periodic check-in (heartbeat, dream cycle, daily report) that a newer one of its
   type supersedes is dropped (a daily report only by one for the same day);
2. an informational item that waited over four hours is dropped as stale;
3. an item that says "cancel", "stop", "never mind" or "scrap" about a task or a
   requirement makes the other (unprotected) items about it redundant: they are
   dropped, and it goes first among the items of its priority;
4. an item that says "hold off", "postpone", "not now" or "no rush" is deferred;
5. of what remains, the most urgent (lowest priority number) goes first, the one that
   waited longest among equals; in a deliberation, other system events of its priority
   join it as a batch (normal priority and below: what can be acknowledged together).

Protected items (a human's, an execution trigger, a review request, a mention) are
never dropped or deferred. The deliberation answers through ``complete_deliberation``;
the mini triage with its JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .offline_plan import FinalFn, PlanFn

DELIBERATION, TRIAGE = "deliberation", "triage"  # attention.scenarios
CANCEL_WORDS = re.compile(r"\b(cancel(?:led)?|stop|never mind|scrap)\b|取消", re.I)
HOLD_WORDS = re.compile(r"\b(hold off|postpone|not now|no rush)\b|暂停", re.I)
STALE_SECONDS = 4 * 3600
HOLD_MINUTES = 60
BATCH_FROM_PRIORITY = 2  # normal and below: what can be acknowledged together
MAX_BATCH = 3


def _text(c: dict[str, Any]) -> str:
    return f"{c.get('summary') or ''} {c.get('content') or ''}"


def _entity(c: dict[str, Any]) -> tuple[str, str] | None:
    if c.get("taskId"):
        return ("task", str(c["taskId"]))
    if c.get("requirementId"):
        return ("requirement", str(c["requirementId"]))
    return None


def _protected(c: dict[str, Any]) -> bool:
    """A person's item, an execution trigger, a review request, a direct mention: the
    loop marks them (``protected``); never deferred, dropped or batched."""
    return bool(c.get("protected"))


def decide(candidates: list[dict[str, Any]], *, deliberating: bool) -> dict[str, Any]:
    """The decision: ``process`` (an id), ``batch``, ``drop`` and ``defer`` (id →
    reason), ``reasoning``, ``awareness``."""
    drop: dict[str, str] = {}
    defer: dict[str, str] = {}
    newest: dict[tuple[str, str], dict[str, Any]] = {}  # (type, the day a report is for) → newest

    def kind(c: dict[str, Any]) -> tuple[str, str]:
        return c["type"], str(c.get("reportDate") or "")

    for c in candidates:
        if c.get("periodic") and (kind(c) not in newest or c["queuedAt"] > newest[kind(c)]["queuedAt"]):
            newest[kind(c)] = c
    for c in candidates:
        if _protected(c):
            continue
        if kind(c) in newest and newest[kind(c)]["id"] != c["id"]:
            drop[c["id"]] = f"superseded by a newer {c['type']} ({newest[kind(c)]['id']})"
        elif (c.get("informational") or c.get("stale")) and float(c.get("ageSeconds") or 0) > STALE_SECONDS:
            drop[c["id"]] = f"stale: informational, waited {int(float(c['ageSeconds']) // 3600)} h"
    cancels = [c for c in candidates if c["id"] not in drop and _entity(c) and CANCEL_WORDS.search(_text(c))]
    for cancel in cancels:
        for c in candidates:
            if c is cancel or c["id"] in drop or _protected(c) or c.get("strict") or c in cancels:
                continue
            if _entity(c) == _entity(cancel):
                drop[c["id"]] = f"redundant: {cancel['id']} cancels it"
    for c in candidates:
        if c["id"] not in drop and not _protected(c) and HOLD_WORDS.search(_text(c)):
            defer[c["id"]] = "the sender asked to hold off"
    remaining = [c for c in candidates if c["id"] not in drop and c["id"] not in defer]
    if not remaining:  # something must run: the head, whatever was said about it
        head = candidates[0]
        drop.pop(head["id"], None)
        defer.pop(head["id"], None)
        remaining = [head]
    cancel_ids = {c["id"] for c in cancels}
    chosen = min(remaining, key=lambda c: (c["priority"], c["id"] not in cancel_ids, c["queuedAt"], c["id"]))
    batch = []
    if deliberating and chosen.get("batchable") and chosen["priority"] >= BATCH_FROM_PRIORITY:
        batch = [
            c["id"]
            for c in remaining
            if c is not chosen
            and c["type"] == chosen["type"]
            and c["priority"] == chosen["priority"]
            and not _protected(c)
            and not c.get("strict")
        ][:MAX_BATCH]
    rivals = [c for c in remaining if c is not chosen and c["priority"] == chosen["priority"]]
    if chosen["id"] in cancel_ids:
        why = "has a cancel in it: it goes first"
    elif rivals:
        why = f"has waited longest of the {len(rivals) + 1} at its priority"
    else:
        why = "is the most urgent"
    reasoning = f"{len(candidates)} items waiting; “{chosen['summary']}” (priority {chosen['priority']}) {why}"
    if batch:
        reasoning += f"; {len(batch)} more {chosen['type']} item(s) of its priority go with it as a batch"
    if drop:
        reasoning += f"; dropped {len(drop)}: " + "; ".join(sorted(set(drop.values())))
    if defer:
        reasoning += f"; deferred {len(defer)}: the sender asked to hold off"
    awareness = (
        f"Deliberated over {len(candidates)} waiting item(s): now {chosen['type']} “{chosen['summary']}”"
        f"{f' with {len(batch)} more' if batch else ''}; "
        f"{len(defer)} deferred, {len(drop)} dropped, "
        f"{len(remaining) - 1 - len(batch)} still queued."
    )
    return {
        "process": chosen["id"],
        "batch": batch,
        "drop": drop,
        "defer": defer,
        "reasoning": reasoning,
        "awareness": awareness,
    }


def offline_triage(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The mini triage's JSON answer."""
    d = decide(candidates, deliberating=False)
    return {
        "processItemId": d["process"],
        "deferItemIds": list(d["defer"]),
        "dropItemIds": list(d["drop"]),
        "reasoning": d["reasoning"],
    }


def deliberation_steps(item: dict[str, Any], agent: str) -> list[tuple[str, dict[str, Any]]]:
    candidates = item.get("candidates") or []
    if not candidates:
        return []
    d = decide(candidates, deliberating=True)
    args: dict[str, Any] = {
        "process_item_id": d["process"],
        "reasoning": d["reasoning"],
        "situational_awareness": d["awareness"],
    }
    if d["batch"]:
        args["batch_item_ids"] = d["batch"]
        args["batch_context"] = "items of one kind and priority, handled together"
    if d["drop"]:
        args["drop"] = [{"item_id": i, "reason": r} for i, r in d["drop"].items()]
    if d["defer"]:
        args["defer"] = [{"item_id": i, "minutes": HOLD_MINUTES, "reason": r} for i, r in d["defer"].items()]
    return [("complete_deliberation", args)]


def _deliberation_final(item: dict[str, Any], agent: str, results: dict[str, str]) -> str:
    return f"{agent} deliberated over {len(item.get('candidates') or [])} waiting item(s)."


def _triage_final(item: dict[str, Any], agent: str, results: dict[str, str]) -> str:
    return json.dumps(offline_triage(item.get("candidates") or []))


# What the offline brain (``markus.llm.offline``) reads of this area.
PLANS: dict[str, PlanFn] = {DELIBERATION: deliberation_steps}
FINALS: dict[str, FinalFn] = {DELIBERATION: _deliberation_final, TRIAGE: _triage_final}
