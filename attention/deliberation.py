"""Tier 2 of triage (seed section 21): the agent deliberates as itself.

When ``MARKUS["TRIAGE_BACKLOG_THRESHOLD"]`` items tie for the head (the head included,
``triage.triage_due``) and the head is not a human's, the loop does not simply take the
head: the agent gets its full system prompt (identity, working memory) and the items
that contend for its attention (``triage.contenders``: the head, its rivals of the same
priority, stale informational items; at most ``PROMPT_QUEUE_LIMIT``, each with its id
and age; the less urgent items only counted) in the ``deliberation`` scenario, with only
``DELIBERATION_ALLOWED_TOOLS`` (read-only tools, inline communication, the mailbox and
working-memory tools). It may handle simple items inline, and ends by calling
``complete_deliberation``: the item (or a batch) to process, items to defer or drop,
ids completed inline, reasoning, situational awareness, working-memory updates.

1. Nothing is claimed or changed in the mailbox while it deliberates: the mailbox tools
   only stage their change (``STAGED``), and the checked decision (``check_decision``)
   becomes a ``Plan`` applied in the transaction that claims the chosen item
   (``triage.apply_plan``).
2. Protected items (``is_protected``: a human's chat or comment, an execution trigger,
   a review request, a requirement update asking for action, a direct mention) are
   never deferred, dropped or completed inline: the tool answers with an error the LLM
   can act on.
3. A human's chat that arrives meanwhile aborts the deliberation at its next turn
   (``ABORTED``): its results are discarded, the attention state goes back to what it
   was, the loop processes the chat and deliberates again afterwards.
4. Its token usage is an activity of its own (``internal``, "Deliberation: …", on no
   item; the ``deliberate`` decision names it); its choices are decisions with the
   reasoning (``deliberate``, ``defer``, ``drop``, ``inline``).
5. A deliberation that fails (the provider raises, no decision after ``MAX_TURNS``)
   falls back to the mini triage; the state goes back as for an abort.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from django.conf import settings
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import ActivityType, MailboxType, Status
from mailbox.selectors import depth_label
from markus import telemetry
from markus.llm.base import CallContext, LLMCancelled, Provider, ToolCall, get_provider

from . import records
from .deliberation_decision import DECISION, DEFAULT_DEFER_MINUTES
from .deliberation_prompt import deliberation_brief, listing
from .focus import Run, agent_is_running, must_let_go
from .journal import execute_atomically
from .lease import AgentNotRunning, Fence, StaleLease, fenced
from .model_call import model_call
from .models import ActivityLogType as L
from .models import AgentActivity, AgentAttention, AttentionState, DecisionType
from .no_progress import Repeats
from .scenarios import DELIBERATION, PROMPT_QUEUE_LIMIT, context_lines, item_brief, system_prompt
from .toolbox import TOOLS, ToolContext, execute_tool, load_tools
from .triage import TRIAGE_ALLOWED_TOOLS, Plan, contenders, triage, triage_due, triage_model

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# What the agent may call while it deliberates (the seed's DELIBERATION_ALLOWED_TOOLS,
# by the names this project's tools have): context gathering, inline communication,
# mailbox management, working memory, and the decision itself. Heavy side effects
# (task_create, task_update, requirement_propose, delegation) belong to processing.
READ_ONLY_TOOLS: Final = TRIAGE_ALLOWED_TOOLS | frozenset({"agent_list_colleagues", "agent_list_group_chats"})
DELIBERATION_ALLOWED_TOOLS: Final = READ_ONLY_TOOLS | frozenset(
    {
        "notify_user",
        "task_comment",  # a tool name, not a mailbox type
        "requirement_comment",  # a tool name, not a mailbox type
        "agent_send_message",
        "agent_send_group_message",
        "agent_create_group_chat",
        "defer_mailbox_item",
        "drop_mailbox_item",
        "prioritize_mailbox_item",
        "update_working_memory",
        "clear_working_memory",
        "memory_save",
        "memory_update_longterm",
        "complete_deliberation",
    }
)
# Tools that write nothing naming the deliberation's activity.
RECORDLESS_TOOLS: Final = READ_ONLY_TOOLS | frozenset(
    {
        "defer_mailbox_item",
        "drop_mailbox_item",
        "prioritize_mailbox_item",
        "update_working_memory",
        "clear_working_memory",
        "complete_deliberation",
    }
)
# Tools that write nothing while the agent deliberates (they read, or stage what the
# decision applies): called without a transaction of their own. Of the recordless tools,
# only the working-memory ones write.
WRITES_NOTHING: Final = RECORDLESS_TOOLS - frozenset({"update_working_memory", "clear_working_memory"})
MAX_TURNS = 8
MEMORY_KEY = "deliberation"


class Aborted:
    def __repr__(self) -> str:
        return "ABORTED"


ABORTED: Final = Aborted()


# ---------------------------------------------------------------------------- which tier


def choose(
    run: Run, head: MailboxItem, queue: list[MailboxItem], depth: int, *, read_at: datetime | None = None
) -> Plan | Aborted | None:
    """Triage before the loop begins an item: None (tier 0: process the head, no LLM
    call, when the head is a human's or no rival ties with it: ``triage.triage_due``), a
    Plan (tier 2 over the contenders, or the mini triage when deliberation is off or
    failed), or ABORTED (a human's chat came in: read the queue again). ``queue``: the
    loop's read, the head first, ``depth`` queued in all; ``read_at``: when the loop read
    it (a chat queued since then, and not listed, aborts the deliberation)."""
    if not triage_due(head, queue, depth):
        return None
    agent = run.the_agent()
    if settings.MARKUS["DELIBERATION"]:
        provider = get_provider(model=triage_model(depth))
        if getattr(provider, "deliberates", True):
            weighed = contenders(head, queue, depth=depth, limit=PROMPT_QUEUE_LIMIT)
            outcome = deliberate(run, weighed, depth, provider, since=read_at)
            if outcome is not None:
                return outcome
    return triage(run.lease, head, queue, agent, depth=depth)


# ---------------------------------------------------------------------------- deliberating


@dataclass
class _Before:
    """The attention state before the deliberation, put back when it is discarded."""

    state: str
    current_item_id: str | None
    focus_started_at: datetime | None


@telemetry.planned("deliberation")
def deliberate(
    run: Run, queue: list[MailboxItem], depth: int, provider: Provider, *, since: datetime | None = None
) -> Plan | Aborted | None:
    """Run the deliberation; a checked Plan, ABORTED (a human's chat came in), or None
    (it failed: the caller falls back to the mini triage). ``queue``: the items it
    weighs, the head first (``triage.contenders`` of the loop's read made at ``since``;
    ``depth`` items are queued in all). A human's chat queued since that read and not
    listed aborts it.

    A brain that answers at once (``provider.local``) deliberates in no time anyone
    could watch: its attention state is not switched to deciding (so it has nothing to
    restore), and its activity is written with the decision, in the transaction that
    claims the chosen item."""
    lease = run.lease
    agent = run.the_agent()
    began = timezone.now()
    since = min(since or began, began)
    items = queue[:PROMPT_QUEUE_LIMIT]
    if len(items) < 2:
        return None
    head = items[0]
    listed = {i.id for i in items}
    model = triage_model(depth) or ""
    d = _begin(run, items, depth, watched=not provider.local, began=began)
    briefs = [deliberation_brief(i) for i in items]
    memory = run.working_memory()
    messages: list[dict[str, Any]] = [{"role": "user", "content": listing(items, depth)}]
    tools = _tool_schemas()
    ctx = ToolContext(
        agent_id=lease.agent_id,
        agent_name=agent.name,
        mailbox_item_id=head.id,
        activity_id=d.activity.id,
        scenario=DELIBERATION,
    )
    call = CallContext(
        scenario=DELIBERATION,
        agent_name=agent.name,
        item={**item_brief(head), "candidates": briefs},
        cancelled=lambda: must_let_go(agent.id),
        model=model,
    )
    try:
        for turn in range(MAX_TURNS):
            if turn:  # the first turn follows the fence's check and the queue's read
                chat = _new_chat(lease.agent_id, listed, since)
                if chat is not None:
                    return d.abort(head, chat)
                if not agent_is_running(agent.id):
                    d.discard("the agent was stopped or paused")
                    raise AgentNotRunning(lease.agent_id)
            # Its first message lists what it weighs: no second mailbox block.
            lines = context_lines(agent, head, DELIBERATION, memory=memory, waiting=False)
            system = "\n".join([system_prompt(agent, head, DELIBERATION), *lines])
            d.note(
                L.LLM_REQUEST,
                f"turn {turn + 1}",
                {"provider": provider.name, "model": model, "messages": len(messages)},
            )
            response = model_call(
                lease, provider, system=system, messages=messages, tools=tools, context=call, during="a deliberation"
            )
            d.tokens += response.usage.total
            messages.append(response.as_message())
            if response.text:
                d.note(L.TEXT, response.text[:4000])
            if not response.tool_calls:
                messages.append({"role": "user", "content": "Call complete_deliberation to finish deliberating."})
                continue
            messages += _tool_round(d, ctx, response.tool_calls)
            if d.stuck:  # no progress (a call repeated to no avail): the mini triage decides instead
                d.discard(d.stuck)
                return None
            decision = ctx.effects.get(DECISION)
            chat = _new_chat(lease.agent_id, listed, since)
            if chat is not None:
                return d.abort(head, chat)
            if decision is not None:
                run.memory = None  # a tool of this turn may have written working memory too
                return _plan(d, items, decision)
            run.memory = None  # a tool may have written working memory
            memory = run.working_memory()
        d.discard(f"no decision after {MAX_TURNS} turns")
        return None
    except (StaleLease, AgentNotRunning):
        raise
    except LLMCancelled as exc:  # the agent was stopped or paused mid-call
        d.discard("the agent was stopped or paused")
        raise AgentNotRunning(lease.agent_id) from exc
    except Exception as exc:
        log.exception("deliberation of %s failed; falling back to the mini triage", lease.agent_id)
        d.discard(f"failed: {exc.__class__.__name__}: {exc}")
        return None


def _begin(run: Run, items: list[MailboxItem], depth: int, *, watched: bool, began: datetime) -> _Deliberation:
    """The deliberation's own activity, on no item (each item's activities are its runs),
    and, when someone could watch it (a provider that does not answer at once), the
    attention state deciding, in one fenced transaction; the state it replaces is kept to
    be restored. A brain that answers at once has its activity written with its outcome."""
    lease, head = run.lease, items[0]
    before: _Before | None = None
    if watched:
        row = AgentAttention.objects.filter(agent_id=lease.agent_id).values_list(
            "state", "current_item_id", "focus_started_at"
        )
        before = _Before(*(row.first() or (AttentionState.IDLE, None, None)))
    activity = records.start_activity(lease, item=head, scenario=DELIBERATION)
    activity.mailbox_item = None
    activity.type = ActivityType.INTERNAL.value
    activity.label = f"Deliberation: {depth_label(depth)} item(s) waiting"
    activity.task_id = None
    activity.private_to = records.private_to_all(items)  # its prompt quotes every item it weighs
    d = _Deliberation(run, activity, before, store=watched)
    d.note(L.STATUS, f"started {DELIBERATION}", {"items": [i.id for i in items]})
    if watched:

        def deciding(tx: Fence) -> None:
            d.flush(tx)
            records.emit_state(lease.agent_id, AttentionState.DECIDING, head, began, depth=depth)

        d.fenced_write(
            deciding,
            running=True,
            state=AttentionState.DECIDING,
            current_item=head,
            focus_started_at=began,
            updated_at=began,
        )
    return d


def _tool_schemas() -> list[dict[str, Any]]:
    load_tools()
    return [
        t.schema()
        for name, t in TOOLS.items()
        if name in DELIBERATION_ALLOWED_TOOLS and (t.scenarios is None or DELIBERATION in t.scenarios)
    ]


def _tool_round(d: _Deliberation, ctx: ToolContext, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """A deliberation turn's calls, each in a fenced transaction of its own (its effect,
    or nothing of it); their log lines written with them when the activity writes as it
    goes. Returns the tool results for the session."""
    results = []
    for call in calls:
        d.tools += 1
        ctx.call_id = call.id
        d.note(L.TOOL_START, call.name, {"arguments": call.arguments, "callId": call.id})
        if call.name not in DELIBERATION_ALLOWED_TOOLS:
            ok, result = False, json.dumps({"error": f"{call.name} is not available while you deliberate"})
        elif call.name in WRITES_NOTHING:
            ok, result = execute_tool(ctx, call.name, call.arguments)
        else:

            def effect(tx: Fence, call: ToolCall = call) -> tuple[bool, str]:  # its effect, or nothing of it
                if call.name not in RECORDLESS_TOOLS:
                    d.store = True  # what the tool writes (a comment) may name the activity: stored first
                d.flush(tx)
                return execute_atomically(tx, ctx, call.name, call.arguments)

            ok, result = d.fenced_write(effect)
        result, stuck = d.repeats.made(call, ok, result)
        d.stuck = d.stuck or stuck
        d.note(L.TOOL_END, result[:4000], {"name": call.name, "ok": ok, "callId": call.id})
        results.append({"role": "tool", "tool_call_id": call.id, "content": result})
    d.flush_fenced()
    return results


class _Deliberation:
    """A deliberation's records: its activity and the log lines not written yet."""

    def __init__(self, run: Run, activity: AgentActivity, before: _Before | None, *, store: bool) -> None:
        self.run = run
        self.activity = activity
        self.before = before
        self.store = store  # write as it goes (a brain that takes its time); else at the end
        self.repeats = Repeats()  # the same refused call, or the same answer, a third time: no progress
        self.stuck = ""
        self.pending: list[records.LogLine] = []
        self.tokens = 0
        self.tools = 0
        self.success = True

    def note(self, kind: str, content: str, metadata: dict[str, Any] | None = None) -> None:
        self.pending.append(records.LogLine(kind, content, metadata, at=timezone.now()))

    def flush(self, tx: Fence) -> None:
        """In the phase's transaction: write what is pending, if this one writes as it goes."""
        if self.store and self.pending:
            records.ensure_stored(tx, self.activity)
            records.log_many(tx, self.activity, self.pending)
            self.pending = []

    def flush_fenced(self) -> None:
        if self.store and self.pending:
            self.fenced_write(self.flush)

    def fenced_write(self, write: Callable[[Fence], _T], **attention: Any) -> _T:
        """The deliberation's one way to write: ``write`` in a fenced transaction of the
        run's lease (``attention``: what ``fenced`` also sets on the attention row)."""
        with fenced(self.run.lease, **attention) as tx:
            return write(tx)

    def end(self, line: str, *, success: bool) -> None:
        """Close the activity with its usage and what is left of its log, when it is
        written (``write``)."""
        self.note(L.STATUS if success else L.ERROR, line)
        self.success = success

    def write(self, tx: Fence) -> None:
        records.end_activity(tx, self.activity, success=self.success, tokens=self.tokens, tools=self.tools)
        records.log_many(tx, self.activity, self.pending)
        self.pending = []

    def restore(self) -> None:
        """Put back the attention state the deliberation found."""
        before = self.before
        if before is None:
            return

        def restored(tx: Fence) -> None:
            item = MailboxItem.objects.filter(id=before.current_item_id).first() if before.current_item_id else None
            records.emit_state(self.run.lease.agent_id, before.state, item, before.focus_started_at)

        self.fenced_write(
            restored,
            state=before.state,
            current_item_id=before.current_item_id,
            focus_started_at=before.focus_started_at,
            updated_at=timezone.now(),
        )

    def discard(self, why: str) -> None:
        self.end(f"deliberation discarded: {why}", success=False)
        self.fenced_write(self.write)
        self.restore()

    def abort(self, head: MailboxItem, chat: MailboxItem) -> Aborted:
        """A human's chat came in: discard the deliberation, put the state back, say so."""
        why = f"a human's chat ({chat.id}) arrived: it goes first, the deliberation runs again after it"
        self.end(f"deliberation aborted: {why}", success=False)

        def aborted(tx: Fence) -> None:
            self.write(tx)
            records.record_decision(
                tx,
                item=head,
                decision_type=DecisionType.DELIBERATE,
                reasoning=f"Deliberation aborted: {why}",
                context={"tier": 2, "abortedBy": chat.id, "activityId": self.activity.id},
                outcome="aborted, results discarded",
            )

        self.fenced_write(aborted)
        self.restore()
        return ABORTED


def _new_chat(agent_id: str, listed: set[str], since: datetime) -> MailboxItem | None:
    """A human's chat queued since the deliberation began (one statement)."""
    return (
        MailboxItem.objects.filter(
            agent_id=agent_id, status=Status.QUEUED, source_type=MailboxType.HUMAN_CHAT, queued_at__gte=since
        )
        .exclude(id__in=listed)
        .order_by("queued_at", "id")
        .first()
    )


def _plan(d: _Deliberation, items: list[MailboxItem], decision: dict[str, Any]) -> Plan:
    by_id = {i.id: i for i in items}
    named = [
        decision["processItemId"],
        *decision["batchItemIds"],
        *decision["defer"],
        *decision["drop"],
        *decision["inline"],
        *decision["priority"],
    ]
    missing = [i for i in dict.fromkeys(named) if i not in by_id]
    for extra in MailboxItem.objects.filter(id__in=missing):
        by_id[extra.id] = extra
    now = timezone.now()
    default_minutes = float(settings.MARKUS["TRIAGE_DEFER_SECONDS"]) / 60 or DEFAULT_DEFER_MINUTES
    defer_until: dict[str, datetime | None] = {}
    reasons: dict[str, str] = {}
    for item_id, detail in decision["defer"].items():
        minutes = detail.get("minutes")
        defer_until[item_id] = now + timedelta(minutes=float(default_minutes if minutes is None else minutes))
        reasons[item_id] = detail.get("reason") or ""
    for item_id, reason in decision["drop"].items():
        reasons[item_id] = reason
    d.end(
        f"deliberated: process {decision['processItemId']}"
        + (f" with {len(decision['batchItemIds'])} more" if decision["batchItemIds"] else ""),
        success=True,
    )
    return Plan(
        chosen=by_id[decision["processItemId"]],
        candidates=list(by_id.values()),
        batch=[i for i in decision["batchItemIds"] if i in by_id],
        drop=[i for i in decision["drop"] if i in by_id],
        defer=[i for i in decision["defer"] if i in by_id],
        reasoning=decision["reasoning"],
        tier=2,
        defer_until=defer_until,
        reasons=reasons,
        inline=[i for i in decision["inline"] if i in by_id],
        priorities={k: int(v) for k, v in decision["priority"].items() if k in by_id},
        awareness=decision["awareness"],
        memory=[(str(k), str(c)) for k, c in decision["memory"]],
        longterm=[(str(k), str(c)) for k, c in decision.get("longterm") or []],
        batch_context=decision["batchContext"],
        activity_id=d.activity.id,
        on_apply=d.write,
    )
