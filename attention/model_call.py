"""The one seam every model call of the loop goes through (ARCHITECTURE decision 18): an
item's turn, a deliberation's, the mini triage's, the interrupt judge. Dreams and daily
reports are items: they come through here too.

``model_call`` owns, in this order:

1. the budgets' gate (``metering.before_call``: ``BudgetExhausted``, no call);
2. the item's ceiling of calls and tokens across its attempts (``ItemSpend``:
   ``CeilingReached``, no call);
3. the call itself, outside any transaction, the lease kept alive by a ``LeaseKeeper``
   meanwhile, with ``max_tokens`` (the scenario's, ``MARKUS_LLM_MAX_TOKENS``) and a
   deadline (``MARKUS_LLM_CALL_MAX_S``; the connect, first-byte and between-chunks
   timeouts are the provider client's, ``MARKUS_LLM_TIMEOUT_S``);
4. a provider error tried again after an exponential back-off with jitter
   (``MARKUS_LLM_RETRIES``, ``MARKUS_LLM_BACKOFF_S``), a server's ``Retry-After``
   honoured; when every try failed, ``ProviderFailed`` names each distinct error;
5. the trace span of each try, and its usage row written as the try ends (a failed try
   with the prompt tokens its request carried, estimated and marked so, as is an answer
   the provider stopped reading because it repeated itself: ``LLMResponse.REPEATING``);
6. the lease proven again after the call (``StaleLease``)."""

from __future__ import annotations

import json
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Sum

from mailbox.models import MailboxItem
from markus import telemetry
from markus.core.input import whole_number
from markus.llm.base import CHARS_PER_TOKEN, CallContext, LLMCancelled, LLMResponse, Provider, ProviderError, Usage
from markus.usage.models import LLMCall

from . import metering
from .lease import Lease, StaleLease, lease_renew_if_due
from .lease_keeper import LeaseKeeper
from .scenarios import SCENARIOS

#: An answer's ``max_tokens`` where neither the scenario nor the settings say.
DEFAULT_MAX_TOKENS = 1024


class ProviderFailed(Exception):
    """Every try of a call failed; ``errors``: each distinct error, in the order first seen."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(dict.fromkeys(errors))
        tries = len(errors)
        super().__init__(f"{tries} {'try' if tries == 1 else 'tries'} failed: {'; '.join(self.errors)}")


class CeilingReached(Exception):
    """The item used up its model calls or tokens (``MARKUS_ITEM_MAX_CALLS`` / ``_TOKENS``)."""


@dataclass
class ItemSpend:
    """What one item's model calls spent across all its attempts, against its ceiling."""

    calls: int = 0
    tokens: int = 0
    max_calls: int = 0
    max_tokens: int = 0

    @classmethod
    def of(cls, item: MailboxItem, scenario: str, *, fresh: bool) -> ItemSpend:
        """What the item's runs of ``scenario`` spent so far (their usage rows; the triage
        and deliberation that chose it are not its own), against the settings. ``fresh``:
        its first attempt, with no session saved: nothing spent, nothing to read."""
        m = settings.MARKUS
        spend = cls(max_calls=int(m["ITEM_MAX_CALLS"]), max_tokens=int(m["ITEM_MAX_TOKENS"]))
        if not fresh:
            spent = LLMCall.objects.filter(mailbox_item_id=item.id, scenario=scenario).aggregate(
                calls=Count("id"), input=Sum("input_tokens"), output=Sum("output_tokens")
            )
            spend.calls = spent["calls"] or 0
            spend.tokens = (spent["input"] or 0) + (spent["output"] or 0)
        return spend

    def charge(self, usage: Usage) -> None:
        self.calls += 1
        self.tokens += usage.total

    def check(self) -> None:
        if self.max_calls and self.calls >= self.max_calls:
            raise CeilingReached(
                f"it used its {self.max_calls} model calls (MARKUS_ITEM_MAX_CALLS) across its attempts"
            )
        if self.max_tokens and self.tokens >= self.max_tokens:
            raise CeilingReached(
                f"it used {self.tokens} of its {self.max_tokens} tokens (MARKUS_ITEM_MAX_TOKENS) across its attempts"
            )


def max_tokens_for(scenario: str) -> int:
    """``MARKUS_LLM_MAX_TOKENS`` for the scenario ("2048" for all, or
    "chat=1024,task_execution=4096"), else the scenario's own, else the default."""
    configured = str(settings.MARKUS["LLM_MAX_TOKENS"] or "").strip()
    found = SCENARIOS[scenario].max_tokens if scenario in SCENARIOS else DEFAULT_MAX_TOKENS
    for part in filter(None, (p.strip() for p in configured.split(","))):
        name, _, value = part.rpartition("=")
        if (not name or name.strip() == scenario) and (number := whole_number(value.strip())) is not None:
            found = number
    return found


def estimate_tokens(system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """A request's prompt tokens when the provider did not say: four characters a token."""
    return len(system) // CHARS_PER_TOKEN + len(json.dumps([messages, tools], default=str)) // CHARS_PER_TOKEN


def backoff(attempt: int, retry_after: float | None = None) -> float:
    """Seconds before try ``attempt + 1``: BACKOFF_S × 2^attempt, ± half (jitter), at
    most BACKOFF_CAP_S; at least what the server asked for (``Retry-After``)."""
    m = settings.MARKUS
    base = float(m["LLM_BACKOFF_S"]) * 2**attempt * random.uniform(0.5, 1.5)
    return min(float(m["LLM_BACKOFF_CAP_S"]), max(base, retry_after or 0.0))


def _pause(seconds: float, context: CallContext) -> None:
    """The back-off, cut short by a cancel (``LLMCancelled``)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if context.cancelled():
            raise LLMCancelled("the call was cancelled while it waited to try again")
        time.sleep(min(left, 0.2))


def model_call(
    lease: Lease,
    provider: Provider,
    *,
    system: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    context: CallContext,
    during: str,
    spend: ItemSpend | None = None,
) -> LLMResponse:
    """One model call, and its tries (the module's docstring says all it owns).
    ``during`` names the call for ``StaleLease``; ``spend``: the item's ceiling."""
    context.max_tokens = context.max_tokens or max_tokens_for(context.scenario)
    metering.before_call(lease, context)  # a budget used up: BudgetExhausted, no call
    m = settings.MARKUS
    errors: list[str] = []
    response: LLMResponse | None = None
    retry_after: float | None = None
    keeper = nullcontext() if provider.local else LeaseKeeper(lease)

    def spent(usage: Usage, error: str = "", *, estimated: bool = False) -> None:  # as the try ends, lease or not
        metering.after_call(lease, provider, context, usage, error=error, estimated=estimated or bool(error))
        if spend is not None:
            spend.charge(usage)

    with keeper:
        for attempt in range(int(m["LLM_RETRIES"]) + 1):
            if spend is not None:
                spend.check()
            if attempt:
                _pause(backoff(attempt - 1, retry_after), context)
            context.deadline = 0.0 if provider.local else time.monotonic() + float(m["LLM_CALL_MAX_S"])
            try:
                with telemetry.chat_span(provider, system=system, messages=messages, context=context) as call:
                    response = provider.complete(system=system, messages=messages, tools=tools, context=context)
                    call.answered(response)
            except ProviderError as exc:  # nothing said what it read: the request's size
                spent(Usage(prompt_tokens=estimate_tokens(system, messages, tools)), str(exc))
                errors.append(str(exc))
                retry_after = exc.retry_after
                if not exc.retryable:
                    break
                continue
            if response.finish_reason == LLMResponse.REPEATING:  # read no further than its loop: no count came
                written = response.usage  # estimated by the provider from all it read
                spent(
                    Usage(written.prompt_tokens or estimate_tokens(system, messages, tools), written.completion_tokens),
                    estimated=True,
                )
            else:
                spent(response.usage)
            break
    lost = isinstance(keeper, LeaseKeeper) and keeper.lost
    if lost or not lease_renew_if_due(lease):
        raise StaleLease(f"lost the lease of {lease.agent_id} during {during}")
    if response is None:
        raise ProviderFailed(errors)
    return response


def model_judge(
    lease: Lease, provider: Provider, *, current: dict[str, Any], new: dict[str, Any], context: CallContext
) -> str:
    """The interrupt judge's one word (each provider asks for a few tokens at most),
    through the same budget gate, span and usage row as every call; one try, bounded by
    the client's timeout (the heuristics' word stands when it fails)."""
    local = provider.local
    if not local:
        metering.before_call(lease, context)
    with telemetry.chat_span(provider, system="", messages=[], context=context) as call:
        try:
            word = provider.judge(current=current, new=new, context=context)
        except ProviderError as exc:
            guess = Usage(prompt_tokens=estimate_tokens("", [current, new], []))
            metering.after_call(lease, provider, context, guess, error=str(exc), estimated=True)
            raise
        call.judged(word, context.usage)
    if not local:  # the offline brain judges by rules: no tokens to count
        metering.after_call(lease, provider, context, context.usage)
    return word
