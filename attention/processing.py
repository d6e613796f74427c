"""Processing one item, along the loop's phases: informational items complete at once
(as the loop begins them), a comment on a task whose execution is open is injected into
that execution's session as it begins (``inject_into_open_work``), everything else runs
its scenario through the tool loop (``tool_loop``), with a yield point after every round
of tool results (``interrupts``), and its outcome is settled through the mailbox
lifecycle (``settle``). Sessions live in ``session``."""

from __future__ import annotations

import logging

from mailbox import lifecycle
from mailbox.models import MailboxItem
from markus import telemetry
from markus.agents.chat import chat_reply_for
from markus.core.shutdown import worker_stopping
from markus.llm.base import LLMCancelled
from markus.usage.budgets import BudgetExhausted
from markus.work.comment_routing import open_work_for

from . import heartbeat, records
from .focus import Failed, Focus, Outcome, Retry, Skipped, Stopped
from .lease import Fence, StaleLease
from .model_call import CeilingReached, ProviderFailed
from .models import ActivityLogType as L
from .models import DecisionType, LLMSession
from .replies import chat_group
from .session import session_id
from .settle import on_approval_answered, settle
from .tool_loop import run_tool_loop

log = logging.getLogger(__name__)

__all__ = ["chat_group", "chat_reply_for", "on_approval_answered", "process_item"]


def process_item(focus: Focus) -> None:
    """Run a begun item (claimed, focused, its activity started) through its scenario
    and settle it."""
    assert focus.activity is not None
    nothing_to_do = heartbeat.quiet_heartbeat(focus)  # no LLM call: it ends skipped
    outcome = Skipped(nothing_to_do) if nothing_to_do else _run(focus)
    telemetry.outcome(outcome.kind, outcome.detail)
    settle(focus, outcome)


def _run(focus: Focus) -> Outcome:
    """The item's scenario through the tool loop; how it ended, a failure included."""
    item, scenario = focus.item, focus.scenario
    try:
        return run_tool_loop(focus)
    except LLMCancelled:
        if worker_stopping():  # back to the queue with its session, for the next run to resume
            return Stopped("the worker stopped mid-call")
        return Stopped("the agent was stopped or paused mid-call")
    except BudgetExhausted as exc:  # back to the queue with its session: it waits for the budget
        return Stopped(f"budget: {exc}")
    except StaleLease:
        raise
    except CeilingReached as exc:  # no more calls for this item: it ends, the person is told
        focus.turn.note(records.LogLine(L.ERROR, f"stopped: {exc}"))
        return Failed(str(exc))
    except ProviderFailed as exc:  # every try of the call failed: the attempt failed
        focus.turn.note(records.LogLine(L.ERROR, str(exc)))
        return Retry(f"provider error: {'; '.join(exc.errors)}")
    except Exception as exc:  # a failure of ours or an unknown one: the attempt failed
        log.exception("attention: %s failed on %s", scenario, item.id)
        assert focus.activity is not None
        focus.turn.note(records.LogLine(L.ERROR, f"{exc.__class__.__name__}: {exc}"))
        return Retry(f"error: {exc.__class__.__name__}: {str(exc)[:200]}")


def inject_into_open_work(tx: Fence, item: MailboxItem) -> bool:
    """A comment on work that is open (its session saved, the item deferred or queued):
    the execution of its task, or for a requirement comment the requirement's action or
    the execution of one of its tasks (``markus.work.comment_routing``), goes into that
    session instead of an activity of its own: merged, in the transaction that began it."""
    if not (item.task_id or item.requirement_id):
        return False
    execution = open_work_for(item)
    if execution is None:
        return False
    if not LLMSession.objects.filter(id=session_id(execution)).exists():
        return False
    # Merged for real (the execution's payload carries it too, should its session be
    # rebuilt); the saved session gets it appended when the execution resumes.
    if not lifecycle.merge_into(item.id, execution.id, claimed_epoch=tx.epoch, into_focus=True):
        return False
    records.record_decision(
        tx,
        item=item,
        decision_type=DecisionType.MERGE,
        reasoning=f"Comment on {'an active task' if item.task_id else 'a requirement being worked on'}"
        " — injected into its session",
        context={"executionItemId": execution.id},
    )
    records.inject_main_session(tx, item=item, outcome="injected into the running task")
    return True
