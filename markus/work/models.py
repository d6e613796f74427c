"""Tasks and requirements, with their comments."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from markus.agents.models import Agent
from markus.core import ids


class TaskState(models.TextChoices):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    BLOCKED = "blocked"
    REVIEW = "review"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    ARCHIVED = "archived"


class RequirementState(models.TextChoices):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    REJECTED = "rejected"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class Requirement(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.requirement_id)
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=RequirementState.choices, default=RequirementState.PENDING)
    created_by_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="proposed_requirements"
    )
    created_by_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    team = models.ForeignKey("agents.Team", null=True, blank=True, on_delete=models.SET_NULL)
    metadata = models.JSONField(default=dict, blank=True)
    # The reason given when it was last rejected ("" if none); cleared when resubmitted.
    rejected_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "requirements"

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"


class Task(models.Model):
    """A unit of work. Additions to the seed's columns:

    - ``cancel_requested_at``: set when the task leaves ``in_progress``; the attention
      loop reads it (``markus.work.execution``) at its next yield point and stops the
      running execution. Cleared when the task re-enters ``in_progress``.
    - ``completed_at``: when the task last reached ``completed`` (kept through
      ``archived``, cleared on reopen), so an archived *completed* dependency still
      counts as satisfied while an archived failed one does not.
    - ``deliverables``: the assignee's note when it last submitted the task for review
      (what was done, where to look); shown to the reviewer and in the approval.
    - ``metadata.watchers``: agent ids that also receive the task's comments;
      ``metadata.reviewApprovalId``: the pending approval of a human reviewer.
    - ``filing_approval``: while set, the task an agent filed waits ``pending`` for a
      person's approval (``Team.agent_task_approval``, ``markus.work.filing``); cleared
      when it is answered or withdrawn.
    - ``blocked_reason``: set while it waits on a dependency that ended badly or in a
      cycle (``markus.work.dead_ends``), "" otherwise.
    """

    id = models.CharField(primary_key=True, max_length=64, default=ids.task_id)
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, default="")
    deliverables = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.PENDING)
    assignee = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_tasks")
    reviewer_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_tasks"
    )
    reviewer_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_tasks"
    )
    created_by_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tasks"
    )
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tasks"
    )
    requirement = models.ForeignKey(Requirement, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks")
    depends_on = models.ManyToManyField("self", symmetrical=False, related_name="dependents", blank=True)
    team = models.ForeignKey("agents.Team", null=True, blank=True, on_delete=models.SET_NULL)
    metadata = models.JSONField(default=dict, blank=True)
    execution_round = models.PositiveIntegerField(default=0)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    filing_approval = models.ForeignKey(
        "notifications.Approval", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Why it can never start as its dependencies stand ("" while it may): markus.work.dead_ends.
    blocked_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "tasks"
        indexes = [models.Index(fields=["assignee", "status"], name="idx_tasks_assignee_status")]

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"


class CommentBase(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.comment_id)
    author_agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    author_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    content = models.TextField()
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, db_column="reply_to_id", related_name="+"
    )
    # The activity that wrote an agent's comment (section 15); NULL for humans.
    activity_id = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"comment {self.id}"


class TaskComment(CommentBase):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")

    class Meta:
        db_table = "task_comments"
        indexes = [models.Index(fields=["task", "created_at"], name="idx_task_comments_task")]


class RequirementComment(CommentBase):
    requirement = models.ForeignKey(Requirement, on_delete=models.CASCADE, related_name="comments")

    class Meta:
        db_table = "requirement_comments"
        indexes = [models.Index(fields=["requirement", "created_at"], name="idx_req_comments_req")]


class StatusChange(models.Model):
    """One transition of a task or a requirement: from, to, who (a person, an agent or
    the system), when, and the note or reason given. Written in the transition's own
    transaction (``history.record``); the work pages and ``…/history`` read it."""

    class Entity(models.TextChoices):
        TASK = "task", "task"
        REQUIREMENT = "requirement", "requirement"

    entity = models.CharField(max_length=16, choices=Entity.choices)
    entity_id = models.CharField(max_length=64)
    from_status = models.CharField(max_length=16, blank=True, default="")  # "" when it was filed
    to_status = models.CharField(max_length=16)
    actor_kind = models.CharField(max_length=8)  # user | agent | system
    actor_id = models.CharField(max_length=64)
    actor_name = models.CharField(max_length=150)
    note = models.TextField(blank=True, default="")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "work_status_changes"
        indexes = [models.Index(fields=["entity", "entity_id", "at"], name="idx_status_changes_entity")]

    def __str__(self) -> str:
        return f"{self.entity} {self.entity_id}: {self.from_status or '∅'} → {self.to_status}"
