"""The budget as the API takes it: ``{"dailyTokens": N, "monthlyCost": X}`` (null: no
limit), and the usage answers (for the schema)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from markus.core.api import StrictIntegerField, unknown_fields

MAX_DAILY_TOKENS = 10**12
MAX_MONTHLY_COST = 10**7


class BudgetInput(serializers.Serializer):
    dailyTokens = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_DAILY_TOKENS,
        help_text="tokens (input + output) per day, all models; null: no limit",
    )
    monthlyCost = serializers.DecimalField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_MONTHLY_COST,
        max_digits=12,
        decimal_places=4,
        coerce_to_string=False,
        help_text="USD per calendar month (MARKUS_PRICES); null: no limit",
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            refusal = unknown_fields(data, self.fields)
            if refusal is not None:
                raise serializers.ValidationError(str(refusal))
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("budget: send dailyTokens, monthlyCost or both (null: no limit)")
        return attrs


class BudgetOut(serializers.Serializer):
    dailyTokens = serializers.IntegerField(allow_null=True)
    monthlyCost = serializers.FloatField(allow_null=True)


class LimitOut(serializers.Serializer):
    scope = serializers.ChoiceField(choices=["agent", "team", "user", "deployment"])
    scopeId = serializers.CharField(help_text="the agent's, the team's or the person's id; empty: the deployment")
    kind = serializers.ChoiceField(choices=["dailyTokens", "monthlyCost"])
    limit = serializers.FloatField()
    used = serializers.FloatField()
    period = serializers.CharField()
    exhausted = serializers.BooleanField()


class BudgetStatusOut(serializers.Serializer):
    blocked = serializers.BooleanField(help_text="a limit is reached: no LLM work until it is raised or renews")
    near = serializers.BooleanField(help_text="past MARKUS_BUDGET_NEAR_SHARE of a limit: heartbeats, dreams skipped")
    reason = serializers.CharField(allow_null=True)
    limits = LimitOut(many=True)


class UsageRowOut(serializers.Serializer):
    day = serializers.DateField()
    model = serializers.CharField()
    calls = serializers.IntegerField()
    inputTokens = serializers.IntegerField(help_text="all input, the cached part included")
    outputTokens = serializers.IntegerField()
    cachedTokens = serializers.IntegerField(help_text="input read from the provider's prompt cache")
    cost = serializers.FloatField(help_text="USD")
    failedCalls = serializers.IntegerField(help_text="calls the provider did not answer (timeout, cut stream …)")
    estimatedInputTokens = serializers.IntegerField(
        help_text="input of failed calls, counted from their requests (4 characters a token)"
    )


class UsageTotalsOut(serializers.Serializer):
    calls = serializers.IntegerField()
    inputTokens = serializers.IntegerField()
    outputTokens = serializers.IntegerField()
    cachedTokens = serializers.IntegerField()
    cost = serializers.FloatField()
    failedCalls = serializers.IntegerField()
    estimatedInputTokens = serializers.IntegerField()


class UsageOut(serializers.Serializer):
    agentId = serializers.CharField(required=False)
    teamId = serializers.CharField(required=False)
    days = serializers.IntegerField()
    rows = UsageRowOut(many=True)
    totals = UsageTotalsOut()
    budget = BudgetOut()
    budgetStatus = BudgetStatusOut()


class TeamPatchInput(serializers.Serializer):
    budget = BudgetInput(required=True)


class BudgetPatchInput(serializers.Serializer):
    """A person's or the deployment's budget: ``{"budget": {...}}``."""

    budget = BudgetInput(required=True)


class ScopeBudgetOut(serializers.Serializer):
    scope = serializers.ChoiceField(choices=["user", "deployment"])
    userId = serializers.IntegerField(required=False, help_text="a person's budget: whose")
    default = serializers.BooleanField(
        required=False, help_text="a person's budget: the default from settings (they have none of their own)"
    )
    budget = BudgetOut()
    budgetStatus = BudgetStatusOut()


class TeamOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    ownerId = serializers.IntegerField()
    agentIds = serializers.ListField(child=serializers.CharField())
    budget = BudgetOut()
    budgetStatus = BudgetStatusOut()
