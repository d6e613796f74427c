"""What a deliberation decides with: the checks of complete_deliberation's decision
(``check_decision``) and what the mailbox tools stage while the agent deliberates
(``stage``: a defer, a drop, a new priority, applied with the decision and discarded with
an abort), never touching a protected item (``check_changeable``)."""

from __future__ import annotations

from typing import Any

from mailbox.merge import is_protected, is_strict, protection_reason
from mailbox.models import MailboxItem
from mailbox.registry import Status

from .batch import MAX_BATCH
from .scenarios import row_for
from .toolbox import ToolContext, ToolError

# ToolContext.effects keys: the checked decision of complete_deliberation, and what the
# mailbox tools staged (applied with the decision, discarded with an abort).
DECISION = "deliberation"


STAGED = "deliberation_staged"


DEFAULT_DEFER_MINUTES = 30


MAX_DEFER_MINUTES = 30 * 24 * 60  # a month: longer is a drop, not a defer


def check_minutes(minutes: Any, what: str) -> None:
    """A defer's minutes: None (the default), or a number from 0 to MAX_DEFER_MINUTES."""
    if minutes is None:
        return
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not 0 <= minutes <= MAX_DEFER_MINUTES:
        raise ToolError(f"{what}: minutes must be a number from 0 to at most {MAX_DEFER_MINUTES} (30 days)")


def check_changeable(item: MailboxItem, action: str) -> None:
    if is_protected(item):
        raise ToolError(
            f"{item.id} is {protection_reason(item)}: it is protected and cannot be {action}; "
            "process it (choose it, or leave it queued)"
        )


def _queued(agent_id: str, item_id: Any, what: str, known: dict[str, MailboxItem] | None = None) -> MailboxItem:
    """The queued item ``item_id`` of this agent (from ``known``, the items read at once,
    when given), else a ToolError naming what is wrong."""
    if not isinstance(item_id, str) or not item_id:
        raise ToolError(f"{what}: expected an item id (a string)")
    if known is not None:
        item = known.get(item_id)
    else:
        item = MailboxItem.objects.filter(agent_id=agent_id, id=item_id).first()
    if item is None:
        raise ToolError(f"{what}: no item {item_id!r} in your mailbox (check_mailbox lists them)")
    if item.status != Status.QUEUED:
        raise ToolError(f"{what}: {item_id} is {item.status}; only queued items can be decided on")
    return item


def _list(args: dict[str, Any], key: str) -> list[Any]:
    value = args.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ToolError(f"complete_deliberation: {key} must be a list")
    return value


def _entries(args: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """A list of {item_id, ...} objects (a bare id string is accepted too)."""
    out = []
    for entry in _list(args, key):
        if isinstance(entry, str):
            entry = {"item_id": entry}
        if not isinstance(entry, dict):
            raise ToolError(f"complete_deliberation: each entry of {key} must be an object with item_id")
        out.append(entry)
    return out


def stage(ctx: ToolContext, action: str, item_id: Any, **detail: Any) -> dict[str, Any]:
    """A mailbox tool's change during a deliberation: checked now, applied with the
    decision (``complete_deliberation``), discarded if the deliberation is aborted."""
    if DECISION in ctx.effects:
        raise ToolError(
            f"{action}_mailbox_item: the deliberation is already complete; a change after "
            "complete_deliberation would be lost. Name it in complete_deliberation's defer or drop instead."
        )
    item = _queued(ctx.agent_id, item_id, f"{action}_mailbox_item")
    if action in ("defer", "drop"):
        check_changeable(item, "deferred" if action == "defer" else "dropped")
    elif row_for(item).in_chat:
        check_changeable(item, "re-prioritised")
    staged: dict[str, dict[str, Any]] = ctx.effects.setdefault(STAGED, {"defer": {}, "drop": {}, "priority": {}})
    if action in ("defer", "drop"):  # the later of the two wins
        staged["drop" if action == "defer" else "defer"].pop(item.id, None)
    staged[action][item.id] = detail
    return {"id": item.id, "staged": action, "note": "applied when you call complete_deliberation", **detail}


def check_decision(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """complete_deliberation's arguments, checked against the mailbox: every id a queued
    item of this agent, each named once, protected items never deferred, dropped or
    completed inline, a strict item never in a batch. ToolError names what is wrong."""
    wanted = [
        args.get("process_item_id"),
        *_list(args, "batch_item_ids"),
        *(e.get("item_id") for key in ("defer", "drop") for e in _entries(args, key)),
        *_list(args, "inline_completed_ids"),
    ]
    ids = {i for i in wanted if isinstance(i, str) and i}
    # Every item it names, in one read (however many it names).
    known = MailboxItem.objects.filter(agent_id=ctx.agent_id).in_bulk(list(ids)) if ids else {}
    chosen = _queued(ctx.agent_id, args.get("process_item_id"), "process_item_id", known)
    named: dict[str, str] = {chosen.id: "process_item_id"}

    def once(item: MailboxItem, where: str) -> None:
        if item.id in named:
            raise ToolError(f"complete_deliberation: {item.id} is named in both {named[item.id]} and {where}")
        named[item.id] = where

    batch = []
    for item_id in _list(args, "batch_item_ids"):
        item = _queued(ctx.agent_id, item_id, "batch_item_ids", known)
        if is_strict(item) or item.is_user_interaction:
            raise ToolError(
                f"batch_item_ids: {item.id} is {protection_reason(item)}; it runs by itself, not in a batch"
            )
        once(item, "batch_item_ids")
        batch.append(item.id)
    if len(batch) > MAX_BATCH:
        raise ToolError(f"batch_item_ids: at most {MAX_BATCH} items join a batch ({len(batch)} named)")
    defer: dict[str, dict[str, Any]] = {}
    for entry in _entries(args, "defer"):
        item = _queued(ctx.agent_id, entry.get("item_id"), "defer", known)
        check_changeable(item, "deferred")
        once(item, "defer")
        minutes = entry.get("minutes")
        check_minutes(minutes, f"defer: {item.id}")
        defer[item.id] = {"minutes": minutes, "reason": str(entry.get("reason") or "")[:300]}
    drop: dict[str, str] = {}
    for entry in _entries(args, "drop"):
        item = _queued(ctx.agent_id, entry.get("item_id"), "drop", known)
        check_changeable(item, "dropped")
        once(item, "drop")
        drop[item.id] = str(entry.get("reason") or "")[:300]
    inline = []
    for item_id in _list(args, "inline_completed_ids"):
        item = _queued(ctx.agent_id, item_id, "inline_completed_ids", known)
        check_changeable(item, "completed inline")
        once(item, "inline_completed_ids")
        inline.append(item.id)
    memory: list[tuple[str, str]] = []
    longterm: list[tuple[str, str]] = []
    for update in _list(args, "memory_updates"):
        if not isinstance(update, dict) or not str(update.get("key") or "").strip():
            raise ToolError("memory_updates: each entry must be an object with a key and a content")
        kind = str(update.get("type") or "working")
        if kind not in ("working", "longterm"):
            raise ToolError(
                'memory_updates: type is "working" (a working-memory key) or "longterm" (a MEMORY.md section)'
            )
        pair = (str(update["key"]).strip()[:200], str(update.get("content") or ""))
        (longterm if kind == "longterm" else memory).append(pair)
    reasoning = str(args.get("reasoning") or "").strip()
    if not reasoning:
        raise ToolError("complete_deliberation: reasoning must say why (one or two sentences)")
    # What the mailbox tools staged joins the decision, unless the decision says otherwise.
    staged = ctx.effects.get(STAGED) or {}
    for item_id, detail in (staged.get("defer") or {}).items():
        if item_id not in named:
            defer[item_id] = {"minutes": detail.get("minutes"), "reason": ""}
    for item_id, detail in (staged.get("drop") or {}).items():
        if item_id not in named and item_id not in defer:
            drop[item_id] = str(detail.get("reason") or "")
    decision = {
        "processItemId": chosen.id,
        "batchItemIds": batch,
        "batchContext": str(args.get("batch_context") or "")[:2000],
        "defer": defer,
        "drop": drop,
        "inline": inline,
        "priority": {k: int(v["priority"]) for k, v in (staged.get("priority") or {}).items()},
        "reasoning": reasoning[:2000],
        "awareness": str(args.get("situational_awareness") or "")[:2000],
        "memory": memory,
        "longterm": longterm,
    }
    ctx.effects[DECISION] = decision
    return {
        "accepted": True,
        "process": chosen.id,
        "batch": batch,
        "defer": sorted(defer),
        "drop": sorted(drop),
        "inline": inline,
    }
