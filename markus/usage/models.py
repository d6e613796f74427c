"""One row per LLM call (``LLMCall``), the budgets (``Budget``) and the notices that one
was used up (``BudgetNotice``), kept here rather than on the agents' and teams' tables."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
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
            # The deployment's budget sums every call of its period.
            models.Index(fields=["created_at"], name="usage_time"),
            # An item's calls across its attempts (its ceiling: ``attention.model_call``).
            models.Index(fields=["mailbox_item_id"], name="usage_item", condition=~Q(mailbox_item_id="")),
        ]

    def __str__(self) -> str:
        return f"{self.scenario} {self.model} ({self.input_tokens}+{self.output_tokens} tokens)"


class Budget(models.Model):
    """Limits of one ``scope``: an agent's, a team's, a person's (``user``: the agents they
    own outside any team) or the whole deployment's (every agent; at most one row). The
    scope's column is set, the others empty. Tokens per day and cost (USD) per calendar
    month; empty: no limit. A person without a row of their own is held by the default
    (``MARKUS["BUDGET_PERSON_*"]``)."""

    class Scope(models.TextChoices):
        AGENT = "agent"
        TEAM = "team"
        USER = "user"
        DEPLOYMENT = "deployment"

    scope = models.CharField(max_length=16, choices=Scope.choices)
    agent = models.OneToOneField(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    team = models.OneToOneField(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    daily_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="empty: no daily token limit")
    monthly_cost = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True, help_text="USD; empty: no monthly cost limit"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "usage_budgets"
        constraints = [
            models.CheckConstraint(
                condition=Q(scope="agent", agent__isnull=False, team__isnull=True, user__isnull=True)
                | Q(scope="team", agent__isnull=True, team__isnull=False, user__isnull=True)
                | Q(scope="user", agent__isnull=True, team__isnull=True, user__isnull=False)
                | Q(scope="deployment", agent__isnull=True, team__isnull=True, user__isnull=True),
                name="usage_budget_scope_column",
                violation_error_message="Set the column of its scope (agent, team or user) and leave the others "
                "empty; the deployment's budget has none.",
            ),
            models.UniqueConstraint(
                fields=["scope"],
                condition=Q(scope="deployment"),
                name="usage_one_deployment",
                violation_error_message="The deployment has one budget: change that one.",
            ),
        ]

    def __str__(self) -> str:
        of = self.agent_id or self.team_id or self.user_id
        return f"budget of the {self.scope} {of}" if of else "budget of the deployment"


class BudgetNotice(models.Model):
    """A ``budget_exhausted`` notification sent: one row per scope and period (``2026-12-02``
    for a day, ``2026-12`` for a month), so its people are told once per period. Its insert
    is the claim (a person's default budget has no ``Budget`` row to hold it)."""

    scope = models.CharField(max_length=16, choices=Budget.Scope.choices)
    scope_id = models.CharField(max_length=64, blank=True, default="")
    period = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "usage_budget_notices"
        constraints = [
            models.UniqueConstraint(fields=["scope", "scope_id", "period"], name="usage_notice_once_per_period")
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.scope_id} told for {self.period}"
