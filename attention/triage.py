"""Triage before processing (seed section 21): which tier, the plan, the mini triage,
applying it.

1. Tier 0 (``triage_due`` is false): the head is a user interaction (they always go
   first), or the priorities clearly separate it from the rest: fewer than
   ``MARKUS["TRIAGE_BACKLOG_THRESHOLD"]`` items tie for the head, the head included
   (``rivals``: the queued items of the head's priority; the queue is in dequeue order,
   so every other item is less urgent). The head is processed, no LLM call.
2. Tier 2 (``attention.deliberation``): the agent deliberates as itself over the
   ``contenders``: the head, its rivals, and informational items waiting longer than
   ``STALE_AFTER`` (offered as stale, to be dropped). The less urgent items wait their
   turn and are only counted.
3. The mini triage (``triage``), when deliberation is off or failed, over the same
   contenders (at most ``MAX_CANDIDATES``). The brain may call read-only tools
   (``TRIAGE_ALLOWED_TOOLS``) for up to ``TRIAGE_MAX_TOOL_ITERATIONS`` rounds, then
   answers JSON ``{processItemId, deferItemIds, dropItemIds, reasoning}``; a malformed
   answer processes the head.
4. Either answer is checked before it is applied: only candidates count, the chosen item
   is never deferred or dropped, and neither is a protected item (a human's chat or
   comment, an execution trigger, a review request, a direct mention). Nothing is
   claimed while the brain thinks: the checked answer is applied in the transaction
   that claims the chosen item (``apply_plan``).
5. ``agent:triage`` announces the result; the reasoning lands in working memory
   (``triage-decision``; a deliberation's situational awareness under ``deliberation``);
   every choice gets its decision record with the reasoning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from agentbus.services import reply_if_expected
from mailbox import lifecycle
from mailbox.merge import is_strict
from mailbox.models import MailboxItem
from mailbox.registry import Status, descriptor
from mailbox.representation import PLACEHOLDER
from mailbox.selectors import queued_before
from markus import telemetry
from markus.agents import memory as working_memory
from markus.agents.models import Agent
from markus.core.errors import MarkusError
from markus.core.events import agent_group, send_event_on_commit
from markus.llm.base import CallContext, Provider, get_provider
from markus.memory import services as longterm_memory

from . import records
from .lease import Fence, Lease, StaleLease, fenced
from .model_call import model_call
from .models import DecisionType
from .scenarios import TRIAGE, bus_stream, identity, item_brief, prompt_summary, row_for, scenario_for
from .toolbox import TOOLS, ToolContext, execute_tool, load_tools

log = logging.getLogger(__name__)
MAX_CANDIDATES = 10
TRIAGE_MEMORY_KEY = "triage-decision"
DELIBERATION_MEMORY_KEY = "deliberation"
TRIAGE_MAX_TOOL_ITERATIONS = 6
# Informational items waiting longer than this are offered to the mini triage as stale.
STALE_AFTER = timedelta(hours=4)
STALE_OFFERED = 3  # at most this many stale items among the candidates
TRIAGE_ALLOWED_TOOLS = frozenset(
    {
        "task_list",
        "task_get",
        "requirement_list",
        "requirement_get",
        "recall_activity",
        "memory_search",
        "memory_search_longterm",
        "check_mailbox",
    }
)
FINAL_ROUND = (
    "No more tools now. Call triage_decision, or answer with JSON only: "
    '{"processItemId": "...", "deferItemIds": [], "dropItemIds": [], "reasoning": "..."}.'
)
#: The decision as a tool call: the structured answer a small model produces most
#: reliably (the JSON answer in text is read too, with the same checks: ``_plan``).
DECISION_TOOL = "triage_decision"
DECISION_SCHEMA = {
    "type": "function",
    "function": {
        "name": DECISION_TOOL,
        "description": "Your decision: the item to process now, the items to defer or drop, and why.",
        "parameters": {
            "type": "object",
            "properties": {
                "processItemId": {"type": "string"},
                "deferItemIds": {"type": "array", "items": {"type": "string"}},
                "dropItemIds": {"type": "array", "items": {"type": "string"}},
                "reasoning": {"type": "string"},
            },
            "required": ["processItemId"],
        },
    },
}


def candidate_brief(item: MailboxItem) -> dict[str, Any]:
    age = (timezone.now() - item.queued_at).total_seconds()
    return {
        **item_brief(item),
        "queuedAt": item.queued_at.isoformat(),
        "ageSeconds": round(age, 1),
        "periodic": descriptor(item.source_type).periodic,
        # System notices can be acknowledged together (a batch), the rest are handled alone.
        "batchable": row_for(item).suggests_batch,
        # A daily report asks for its own day: one of another day is not superseded.
        **({"reportDate": str(item.extra["date"])} if item.extra.get("date") else {}),
    }


def triage_model(depth: int | None) -> str | None:
    """The cheaper model for a triage or a deliberation (``MARKUS_TRIAGE_MODEL``) while
    few items wait (at most ``TRIAGE_MODEL_MAX_ITEMS``); None: the main model."""
    model = str(settings.MARKUS.get("TRIAGE_MODEL") or "")
    if not model or (depth is not None and depth > int(settings.MARKUS.get("TRIAGE_MODEL_MAX_ITEMS", 5))):
        return None
    return model


@dataclass
class Plan:
    """Triage's answer, checked: the item to process now, and the candidates to drop
    and to defer (ids), applied in the transaction that claims the chosen item;
    ``batch``: ids of other queued items processed together with the chosen one, in
    one LLM session (issue 15: claimed with it, re-queued with it if interrupted).

    A deliberation (``tier`` 2) also says until when each deferred item waits
    (``defer_until``), why each item is deferred or dropped (``reasons``), which items
    it completed inline, new priorities, its situational awareness and working-memory
    updates, what binds a batch (``batch_context``), and its activity."""

    chosen: MailboxItem
    candidates: list[MailboxItem]
    batch: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    defer: list[str] = field(default_factory=list)
    reasoning: str = ""
    tier: int = 1
    defer_until: dict[str, datetime | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    inline: list[str] = field(default_factory=list)
    priorities: dict[str, int] = field(default_factory=dict)
    awareness: str = ""
    memory: list[tuple[str, str]] = field(default_factory=list)
    # (MEMORY.md section, text) a deliberation appends to the agent's long-term memory
    longterm: list[tuple[str, str]] = field(default_factory=list)
    batch_context: str = ""
    activity_id: str | None = None
    # Records the plan's maker writes in the transaction that applies it (a
    # deliberation's activity), or itself when the plan is not applied (``discard``).
    on_apply: Callable[[Fence], None] | None = None

    def write_records(self, tx: Fence) -> None:
        """The records of the plan's maker, once, in the phase's transaction."""
        if self.on_apply is not None:
            self.on_apply(tx)
            self.on_apply = None

    def discard(self, lease: Lease) -> None:
        """The plan will not be applied (its chosen item is gone): its records are
        written all the same, in a transaction of their own."""
        if self.on_apply is not None:
            with fenced(lease) as tx:
                self.write_records(tx)

    @property
    def pick_reasoning(self) -> str:
        """What the pick decision of the chosen item says."""
        who = "Deliberation" if self.tier == 2 else "Triage"
        return f"{who}: {self.reasoning}" if self.reasoning else f"{who} chose it"


def _protected(item: MailboxItem) -> bool:
    return item.is_user_interaction or is_strict(item) or row_for(item).protected


def is_stale(item: MailboxItem, now: datetime | None = None) -> bool:
    """An informational item (it runs no scenario) that waited longer than STALE_AFTER."""
    now = now or timezone.now()
    return scenario_for(item) is None and not _protected(item) and now - item.queued_at > STALE_AFTER


def _stale_beyond(agent_id: str, seen: set[str], now: datetime) -> list[MailboxItem]:
    """Informational items queued longer than STALE_AFTER that the loop's read of the
    queue did not reach (one statement, only when that read was full)."""
    # The seen items are left out here, not in the statement: one precompiled statement
    # whatever they are (its SQL built by the ORM was 17 % of the loop's time per item).
    rows = [r for r in queued_before(agent_id, now - STALE_AFTER, STALE_OFFERED * 4 + len(seen)) if r.id not in seen]
    return [r for r in rows[: STALE_OFFERED * 4] if is_stale(r, now)][:STALE_OFFERED]


# ---------------------------------------------------------------------------- which tier


def rivals(head: MailboxItem, queue: list[MailboxItem]) -> list[MailboxItem]:
    """The items that tie with the head (the seed's "overlapping priorities"): the
    queued items of its priority, in dequeue order. ``queue`` is in dequeue order, the
    head first: every other item is of a less urgent priority, which clearly separates
    it from the head."""
    return [q for q in queue if q.id != head.id and q.priority == head.priority]


def _read_ends_among_rivals(head: MailboxItem, queue: list[MailboxItem], depth: int | None, tied: int) -> bool:
    """The loop's read of the queue stopped before the queue's end, on an item that
    ties with the head: more rivals may wait behind it."""
    return depth is not None and len(queue) < depth and tied + 1 == len(queue)


def triage_due(head: MailboxItem, queue: list[MailboxItem], depth: int | None = None) -> bool:
    """Tier 1 or 2 is due (else tier 0: the head at once, no LLM call): triage is on,
    the head is not a human's, and at least ``TRIAGE_BACKLOG_THRESHOLD`` items tie for
    the head, the head included. ``queue``: the loop's read (the head first), ``depth``
    items queued in all; they are counted only when the read ends among the ties and the
    threshold is above it."""
    if head.is_user_interaction or not settings.MARKUS["TRIAGE"]:
        return False
    threshold = max(2, int(settings.MARKUS["TRIAGE_BACKLOG_THRESHOLD"]))
    tied = len(rivals(head, queue))
    if tied + 1 < threshold and _read_ends_among_rivals(head, queue, depth, tied):
        tied = lifecycle.queued(head.agent_id).filter(priority=head.priority).count() - 1
    return tied + 1 >= threshold


def contenders(head: MailboxItem, queue: list[MailboxItem], *, depth: int | None, limit: int) -> list[MailboxItem]:
    """What a triage weighs, at most ``limit`` items: the head, its rivals (read further
    when the loop's read ends among them), then up to ``STALE_OFFERED`` informational
    items waiting longer than ``STALE_AFTER`` (offered as stale, to be dropped)."""
    now = timezone.now()
    tied = rivals(head, queue)
    more = len(queue) < depth if depth is not None else len(queue) >= MAX_CANDIDATES
    if _read_ends_among_rivals(head, queue, depth, len(tied)) and len(queue) < limit:
        tied = [q for q in lifecycle.queued(head.agent_id).filter(priority=head.priority)[:limit] if q.id != head.id]
    stale = [q for q in queue if q.priority != head.priority and is_stale(q, now)]
    if more:  # the loop's read stopped short: stale items may wait behind it
        stale += _stale_beyond(head.agent_id, {q.id for q in [*queue, *tied]}, now)
    stale = stale[:STALE_OFFERED]
    return [head, *tied[: limit - 1 - len(stale)], *stale]


@telemetry.planned("mini_triage")
def triage(
    lease: Lease, head: MailboxItem, queue: list[MailboxItem], agent: Agent, *, depth: int | None = None
) -> Plan | None:
    """The mini triage over the ``contenders`` (None: process the head). ``queue``: the
    queued items in dequeue order, the head first, none claimed yet; the provider is
    asked outside any transaction."""
    if not triage_due(head, queue, depth):
        return None
    now = timezone.now()
    candidates = contenders(head, queue, depth=depth, limit=MAX_CANDIDATES)
    if len(candidates) < 2:
        return None
    provider = get_provider(model=triage_model(depth))
    if not provider.triages:
        return None
    briefs = [{**candidate_brief(c), "stale": is_stale(c, now)} for c in candidates]
    try:
        answer = _ask(lease, provider, head, briefs, agent, triage_model(depth) or "")
    except StaleLease:
        raise
    except Exception:
        log.exception("triage failed for %s; processing the head", lease.agent_id)
        return None
    if answer is None:
        log.warning("triage of %s answered no JSON decision; processing the head", lease.agent_id)
        return None
    return _plan(head, candidates, answer)


def _prompt(briefs: list[dict[str, Any]]) -> str:
    lines = ["These items compete for your attention (oldest first within a priority):"]
    for b in briefs:
        flag = " — stale (informational, waited over 4 h)" if b.get("stale") else ""
        waited = round(b["ageSeconds"] / 60)
        summary = prompt_summary(b["summary"])
        lines.append(f"- {b['id']} [priority {b['priority']}] {b['type']}: {summary} — waited {waited} min{flag}")
    lines.append('Answer with JSON only: {"processItemId", "deferItemIds", "dropItemIds", "reasoning"}.')
    return "\n".join(lines)


def _ask(
    lease: Lease, provider: Provider, head: MailboxItem, briefs: list[dict[str, Any]], agent: Agent, model: str
) -> dict[str, Any] | None:
    """Up to TRIAGE_MAX_TOOL_ITERATIONS rounds of read-only tools, then the JSON answer."""
    load_tools()
    tools = [t.schema() for name, t in TOOLS.items() if name in TRIAGE_ALLOWED_TOOLS] + [DECISION_SCHEMA]
    tool_ctx = ToolContext(agent_id=lease.agent_id, agent_name=agent.name, scenario=TRIAGE)
    context = CallContext(
        scenario=TRIAGE, agent_name=agent.name, item={**item_brief(head), "candidates": briefs}, model=model
    )
    system = f"{identity(agent)} You decide what to work on next."
    messages: list[dict[str, Any]] = [{"role": "user", "content": _prompt(briefs)}]
    for round_ in range(TRIAGE_MAX_TOOL_ITERATIONS + 1):
        final = round_ == TRIAGE_MAX_TOOL_ITERATIONS
        if final:  # the tool rounds are used up: the answer now
            messages.append({"role": "user", "content": FINAL_ROUND})
        # The tools stay declared in the last round too: a history with tool calls needs
        # them (the Anthropic API refuses it otherwise); a tool call then is no answer.
        response = model_call(
            lease, provider, system=system, messages=messages, tools=tools, context=context, during="triage"
        )
        messages.append(response.as_message())
        decided = [c.arguments for c in response.tool_calls if c.name == DECISION_TOOL]
        if decided and isinstance(decided[-1].get("processItemId"), str):
            return decided[-1]
        if not response.tool_calls or final:
            return parse_answer(response.text)
        for call in response.tool_calls:
            if call.name in TRIAGE_ALLOWED_TOOLS:
                tool_ctx.call_id = call.id
                _, result = execute_tool(tool_ctx, call.name, call.arguments)
            elif call.name == DECISION_TOOL:
                result = json.dumps({"error": "processItemId must be the id of one of the listed items"})
            else:
                result = json.dumps({"error": f"{call.name} is not available in triage (read-only tools only)"})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return None


def parse_answer(text: str) -> dict[str, Any] | None:
    """The JSON decision in the answer: the first JSON object in it, bare or amid prose
    (which may hold braces of its own), that names an item to process; None when there
    is none."""
    text = (text or "").strip()
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            answer, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, ValueError, RecursionError):
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("processItemId"), str):
            return answer
        start = text.find("{", start + 1)
    return None


def _ids(answer: dict, key: str) -> list[str]:
    value = answer.get(key) or []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _plan(head: MailboxItem, candidates: list[MailboxItem], answer: dict) -> Plan:
    by_id = {c.id: c for c in candidates}
    pid = answer.get("processItemId")
    chosen = (by_id.get(pid) if isinstance(pid, str) else None) or head
    # A protected item (a human's, a strict one a task waits for, a mention) is never
    # deferred or dropped.
    untouchable = {chosen.id} | {c.id for c in candidates if _protected(c)}
    drop = [i for i in dict.fromkeys(_ids(answer, "dropItemIds")) if i in by_id and i not in untouchable]
    defer = [
        i for i in dict.fromkeys(_ids(answer, "deferItemIds")) if i in by_id and i not in untouchable and i not in drop
    ]
    reasoning = str(answer.get("reasoning") or "")[:2000]
    return Plan(chosen=chosen, candidates=candidates, drop=drop, defer=defer, reasoning=reasoning)


def apply_plan(
    tx: Fence,
    plan: Plan,
    *,
    remember: Callable[[str, str], None] | None = None,
    known: list[working_memory.Entry] | None = None,
) -> None:
    """Apply what triage said (only to items still queued): drops, defers, items a
    deliberation completed inline, new priorities; keep the reasoning in working memory;
    record every choice; announce ``agent:triage``. Runs in the fenced transaction that
    claims the chosen item; ``remember``: told of each working-memory write; ``known``:
    the working memory as the run holds it (not read again to bound it)."""
    by_id = {c.id: c for c in plan.candidates}
    now = timezone.now()
    default_until = now + timedelta(seconds=float(settings.MARKUS["TRIAGE_DEFER_SECONDS"]))
    deliberated = plan.tier == 2
    tx.check()
    plan.write_records(tx)  # its own records first (a deliberation's activity)
    dropped, deferred, inline = [], [], []
    for item_id in plan.drop:
        why = plan.reasons.get(item_id) or plan.reasoning
        if lifecycle.drop(item_id, reason=f"{_who(plan)}: {why}"[:300], from_statuses=[Status.QUEUED]):
            _record(tx, plan, by_id[item_id], DecisionType.DROP, why)
            _answer_waiting(tx, by_id[item_id], f"(not answered: {_who(plan)} set this message aside: {why})")
            dropped.append(item_id)
    for item_id in plan.defer:
        until = plan.defer_until.get(item_id, default_until) if deliberated else default_until
        if lifecycle.defer(item_id, until=until, from_statuses=[Status.QUEUED]):
            _record(tx, plan, by_id[item_id], DecisionType.DEFER, plan.reasons.get(item_id) or plan.reasoning)
            deferred.append(item_id)
    for item_id in plan.inline:
        if lifecycle.transition(
            item_id, from_statuses=[Status.QUEUED], status=Status.COMPLETED, started_at=now, completed_at=now
        ):
            item = by_id[item_id]
            _record(tx, plan, item, DecisionType.INLINE, f"Handled inline while deliberating: {plan.reasoning}")
            records.inject_main_session(tx, item=item, outcome="handled inline during deliberation")
            _answer_waiting(tx, item, f"(handled while sorting the mailbox: {plan.reasoning})")
            inline.append(item_id)
    reprioritised: dict[str, int] = {}
    for item_id, priority in plan.priorities.items():
        item = by_id[item_id]
        if priority != item.priority and lifecycle.set_priority(item_id, priority):
            _record(tx, plan, item, DecisionType.DELIBERATE, f"priority {item.priority} → {priority}")
            reprioritised[item_id] = priority
    writes: list[tuple[str, str]] = []
    if deliberated:
        writes.append((DELIBERATION_MEMORY_KEY, plan.awareness or plan.reasoning))
        writes += plan.memory
    elif plan.reasoning:
        writes.append((TRIAGE_MEMORY_KEY, plan.reasoning))
    for key, content in writes:
        # Every key through the one bounded writer: the oldest entries are trimmed
        # when the total would grow past the bound (markus.agents.memory).
        written = working_memory.remember(tx.agent_id, key, content, now=now, known=known).entry
        if known is not None:  # the next write of this plan knows of this one
            known = [*(e for e in known if e.key != written.key), written]
        if remember is not None:
            remember(written.key, written.content)
    for section, text in plan.longterm:
        try:
            longterm_memory.section_write(agent_id=tx.agent_id, title=section, content=text, mode="append")
        except MarkusError as error:  # over a limit: the deliberation is over, its choice stands
            log.warning("deliberation of %s: long-term memory not updated: %s", tx.agent_id, error)
    if deliberated:
        records.record_decision(
            tx,
            item=plan.chosen,
            decision_type=DecisionType.DELIBERATE,
            reasoning=f"Deliberation: {plan.reasoning}",
            context={
                "tier": 2,
                "processItemId": plan.chosen.id,
                "batchItemIds": plan.batch,
                "batchContext": plan.batch_context,
                "deferItemIds": deferred,
                "dropItemIds": dropped,
                "inlineCompletedIds": inline,
                "priorities": reprioritised,
                "situationalAwareness": plan.awareness,
                "activityId": plan.activity_id,
            },
            outcome=f"process {plan.chosen.id}" + (f" with {len(plan.batch)} more" if plan.batch else ""),
        )
    triage = {
        "agentId": tx.agent_id,
        "tier": plan.tier,
        "candidates": [c.id for c in plan.candidates],
        "processItemId": plan.chosen.id,
        "processItemIds": [plan.chosen.id, *plan.batch],
        "deferItemIds": plan.defer,
        "dropItemIds": plan.drop,
        "inlineCompletedIds": plan.inline,
        "priorities": reprioritised,
    }
    thoughts = {"reasoning": plan.reasoning, "situationalAwareness": plan.awareness}
    send_event_on_commit(
        agent_group(tx.agent_id),
        "agent:triage",
        {**triage, **thoughts},
        private_to=records.private_to_all([plan.chosen, *plan.candidates]),
        public={**triage, "reasoning": PLACEHOLDER, "situationalAwareness": ""},
    )


def _who(plan: Plan) -> str:
    return "deliberation" if plan.tier == 2 else "triage"


def _answer_waiting(tx: Fence, item: MailboxItem, text: str) -> None:
    """An agent message waiting for this agent's answer that triage set aside (dropped,
    or handled inline without agent_reply) is answered with ``text``, so its sender, or a
    bus ``request``, does not wait for its timeout. Inside the fenced transaction."""
    stream_id = bus_stream(item)
    if stream_id is None:
        return
    responder = Agent.objects.get(id=tx.agent_id)
    reply_if_expected(responder=responder, stream_id=stream_id, text=text[:2000], actor=f"agent:{tx.agent_id}")


def _record(tx: Fence, plan: Plan, item: MailboxItem, decision: str, reasoning: str) -> None:
    prefix = "Deliberation" if plan.tier == 2 else "Triage"
    records.record_decision(
        tx, item=item, decision_type=decision, reasoning=f"{prefix}: {reasoning}", context={"tier": plan.tier}
    )
