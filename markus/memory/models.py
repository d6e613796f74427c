"""An agent's long-term memory: the sections of its MEMORY.md, the observations it
saved (``memory_save``), and where its last dream got to.

Both text tables are searched by full text (``search``): on SQLite through FTS5 tables
that triggers keep in step with every write (migration 0002), on PostgreSQL through GIN
expression indexes."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class MemorySection(models.Model):
    """One ``## Title`` section of MEMORY.md; ``position`` orders the document."""

    id = models.BigAutoField(primary_key=True)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="memory_sections")
    title = models.CharField(max_length=200)
    content = models.TextField(blank=True, default="")
    position = models.IntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_sections"
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["agent", "title"], name="one_memory_section_per_title")]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.title}"


class Observation(models.Model):
    """Something the agent noticed and saved; ``count`` is how many saved observations
    a dream merged into this one (1: never merged)."""

    id = models.BigAutoField(primary_key=True)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="observations")
    content = models.TextField()
    kind = models.CharField(max_length=32, default="note")
    count = models.IntegerField(default=1)
    mailbox_item_id = models.CharField(max_length=64, blank=True, default="")
    activity_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_observations"
        indexes = [models.Index(fields=["agent", "id"], name="idx_memory_obs_agent")]

    def __str__(self) -> str:
        return f"{self.agent_id} #{self.id}"


class MemoryState(models.Model):
    """Where the agent's dreams got to: observations with an id up to
    ``consolidated_through`` have been through a dream (the rest are new)."""

    agent = models.OneToOneField("agents.Agent", primary_key=True, on_delete=models.CASCADE, related_name="+")
    consolidated_through = models.BigIntegerField(default=0)
    consolidated_at = models.DateTimeField(null=True, blank=True)
    dreams = models.IntegerField(default=0)

    class Meta:
        db_table = "memory_state"
        verbose_name = "memory state"

    def __str__(self) -> str:
        return f"memory state of {self.agent_id}"
