"""A manager agent's daily report: one per agent and local date."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class DailyReport(models.Model):
    """The report an agent wrote about its day (``submit_daily_report``). ``date`` is the
    date in the agent's time zone; ``activity`` is the day's activity digest at the time
    of writing (counts by type, outcomes, tokens, and the activity that wrote it)."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="daily_reports")
    date = models.DateField()
    content = models.TextField()
    activity = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "daily_reports"
        ordering = ["-date", "-id"]
        constraints = [models.UniqueConstraint(fields=["agent", "date"], name="uniq_daily_report_agent_date")]

    def __str__(self) -> str:
        return f"Daily report of {self.agent_id} for {self.date}"
