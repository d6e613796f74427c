"""Before and after every LLM call of the loop (``model_call``, the judge):
the budgets' check and the usage record (``markus.usage``). The scenarios whose row
says ``skipped_near_budget`` (heartbeats and dreams) are refused first, from the
budgets' near share on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from markus.llm.base import CallContext, Provider, Usage
from markus.usage import budgets
from markus.usage.services import Call, model_of, record_calls

from .scenarios import row

if TYPE_CHECKING:
    from .lease import Lease

# A run of the loop (one lease epoch) that found no budget for its agent reads them no
# more: a budget set meanwhile counts from the next run (a run ends after
# MARKUS["RUN_BUDGET_ITEMS"] items); an existing budget is read before every call. The
# run's take says so (``Lease.budgeted``: no budget read at all), or its first gate
# that found none. Keyed by agent: the run's lease (its owner token is new at every take).
_unbudgeted: dict[str, tuple[str, int]] = {}


def _unbudgeted_run(lease: Lease) -> bool:
    return not lease.budgeted or _unbudgeted.get(lease.agent_id) == (lease.owner, lease.epoch)


def gate(lease: Lease) -> budgets.Gate:
    """The budgets before the loop begins an item."""
    if _unbudgeted_run(lease):
        return budgets.Gate()
    read = budgets.gate(lease.agent_id)
    if read.limits:
        _unbudgeted.pop(lease.agent_id, None)
    else:
        _unbudgeted[lease.agent_id] = (lease.owner, lease.epoch)
    return read


def before_call(lease: Lease, context: CallContext) -> None:
    """Raises ``BudgetExhausted`` when a budget refuses the call."""
    if _unbudgeted_run(lease):
        return
    budgets.check_call(lease.agent_id, skippable=row(context.scenario).skipped_near_budget)


# The calls of a brain in this process not written yet, by agent (``after_call``, ``flush``).
_pending: dict[str, list[Call]] = {}


def after_call(
    lease: Lease,
    provider: Provider,
    context: CallContext,
    usage: Usage | None,
    *,
    error: str = "",
    estimated: bool = False,
) -> None:
    """The call's usage row, written as the call ends (its own statement, outside the
    loop's transactions), so the usage API and the next budget check see a run in
    progress. ``error``: why it failed; ``estimated``: tokens counted from the request.
    A brain in this process (the offline one: no money, no wait) with no budget to
    check has its rows written together as its run ends (``flush``): one statement a
    run instead of one a call, on the hot path of every demo item."""
    item_id = context.item.get("id") if isinstance(context.item, dict) else None
    call = Call(
        agent_id=lease.agent_id,
        model=model_of(provider, context.model),
        scenario=context.scenario,
        usage=usage or Usage(),
        mailbox_item_id=item_id if isinstance(item_id, str) else "",
        error=error,
        estimated=estimated,
    )
    if provider.local and _unbudgeted_run(lease):
        _pending.setdefault(lease.agent_id, []).append(call)
        return
    record_calls([*_pending.pop(lease.agent_id, []), call])


def flush(lease: Lease) -> None:
    """Write what the run's local calls spent and is not written yet (as a run ends)."""
    record_calls(_pending.pop(lease.agent_id, []))
