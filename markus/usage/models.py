"""One row per LLM call (``LLMCall``) and the budgets (``Budget``), kept here rather
than on the agents' and teams' tables."""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q
from django.utils import timezone

from markus.agents.models import Agent, Team


class LLMCall(models.Model):
    """An LLM call: who made it (the agent, and its team at that time), with which model,
    in which scenario (an item's scenario, ``deliberation``, ``triage``, ``judge``, …),
    what it used (``input_tokens`` counts all input, ``cached_tokens`` the part read from
    the provider's prompt cache) and what that cost (``markus.usage.prices``, USD).

    Written as each call ends (``attention.model_call``), a failed one too: ``error``
    says why it failed ("" when it was answered), and ``estimated`` marks tokens the
    provider did not report (a failed call's prompt, counted from the request)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=200)
    scenario = models.CharField(max_length=64)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    mailbox_item_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    error = models.CharField(max_length=300, blank=True, default="")
    estimated = models.BooleanField(default=False)

    class Meta:
        db_table = "usage_llm_calls"
        indexes = [
            models.Index(fields=["agent", "created_at"], name="usage_agent_time"),
            models.Index(fields=["team", "created_at"], name="usage_team_time"),
            # An item's calls across its attempts (its ceiling: ``attention.model_call``).
            models.Index(fields=["mailbox_item_id"], name="usage_item", condition=~Q(mailbox_item_id="")),
        ]

    def __str__(self) -> str:
        return f"{self.scenario} {self.model} ({self.input_tokens}+{self.output_tokens} tokens)"


class Budget(models.Model):
    """An agent's or a team's limits (exactly one of the two is set): tokens per day and
    cost (USD) per calendar month; empty: no limit. ``notified_period`` is the period
    (``2026-12-02`` for the day, ``2026-12`` for the month) whose ``budget_exhausted``
    notification was sent, so the owner is told once per period."""

    agent = models.OneToOneField(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    team = models.OneToOneField(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    daily_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="empty: no daily token limit")
    monthly_cost = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True, help_text="USD; empty: no monthly cost limit"
    )
    notified_period = models.CharField(max_length=16, blank=True, default="", editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "usage_budgets"
        constraints = [
            models.CheckConstraint(
                condition=Q(agent__isnull=False, team__isnull=True) | Q(agent__isnull=True, team__isnull=False),
                name="usage_budget_one_owner",
            )
        ]

    def __str__(self) -> str:
        return f"budget of {self.agent_id or self.team_id}"
