"""Response shapes of the task and requirement endpoints, for the OpenAPI schema. They
describe what ``selectors.task_data`` / ``requirement_data`` / ``comment_data`` and
``api.task_detail`` already answer; the views do not serialise through them."""

from __future__ import annotations

from rest_framework import serializers

from .models import RequirementState, TaskState


class TaskOut(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    deliverables = serializers.CharField(
        allow_blank=True, help_text="the assignee's note when it last submitted the task for review"
    )
    status = serializers.ChoiceField(choices=TaskState.choices)
    assigneeId = serializers.CharField(allow_null=True)
    reviewerId = serializers.CharField(allow_null=True, help_text="the reviewing agent")
    reviewerUserId = serializers.IntegerField(allow_null=True, help_text="the reviewing human")
    createdByAgentId = serializers.CharField(allow_null=True)
    createdByUserId = serializers.IntegerField(allow_null=True)
    requirementId = serializers.CharField(allow_null=True)
    teamId = serializers.CharField(allow_null=True)
    dependsOn = serializers.ListField(child=serializers.CharField(), help_text="task ids, sorted")
    dependents = serializers.IntegerField(
        help_text="tasks waiting on this one (pending or blocked): a cancel asks whether to cancel them too"
    )
    awaitingApproval = serializers.BooleanField(
        help_text="filed by an agent, it waits pending for a person's approval (its team's agentTaskApproval)"
    )
    blockedReason = serializers.CharField(
        allow_null=True,
        help_text="why it can never start as its dependencies stand (a dependency failed, rejected, cancelled or "
        "archived unfinished; a cycle), null while it may: retry or change the dependency, or cancel it",
    )
    metadata = serializers.DictField()
    executionRound = serializers.IntegerField()
    cancelRequestedAt = serializers.DateTimeField(allow_null=True)
    completedAt = serializers.DateTimeField(allow_null=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class TaskDetailOut(TaskOut):
    pendingInbox = serializers.IntegerField(
        allow_null=True, help_text="messages waiting in the assignee's AgentBus inbox (null without an assignee)"
    )


class TaskTransitionOut(TaskDetailOut):
    cascaded = serializers.ListField(
        child=serializers.CharField(), help_text="the dependents cancelled with it (cascade: true), sorted"
    )


class TaskListOut(serializers.Serializer):
    tasks = TaskOut(many=True)
    totalCount = serializers.IntegerField(help_text="counted up to 10,000")
    totalCountCapped = serializers.BooleanField(help_text="more than totalCount match (shown as 10,000+)")


class RequirementOut(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=RequirementState.choices)
    createdByAgentId = serializers.CharField(allow_null=True)
    createdByUserId = serializers.IntegerField(allow_null=True)
    agentId = serializers.CharField(allow_null=True, help_text="the agent in charge")
    teamId = serializers.CharField(allow_null=True)
    taskIds = serializers.ListField(child=serializers.CharField(), help_text="task ids, sorted")
    rejectedReason = serializers.CharField(
        allow_null=True, help_text="the reason given when it was last rejected (null: none; cleared on resubmit)"
    )
    metadata = serializers.DictField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class RequirementListOut(serializers.Serializer):
    requirements = RequirementOut(many=True)
    totalCount = serializers.IntegerField(help_text="counted up to 10,000")
    totalCountCapped = serializers.BooleanField(help_text="more than totalCount match (shown as 10,000+)")


class _CommentFields(serializers.Serializer):
    id = serializers.CharField()
    authorKind = serializers.ChoiceField(choices=["user", "agent", "system"])
    authorId = serializers.CharField(allow_null=True)
    authorName = serializers.CharField()
    content = serializers.CharField()
    replyToCommentId = serializers.CharField(allow_null=True)
    replyToAuthor = serializers.CharField(allow_null=True)
    replyToContent = serializers.CharField(allow_null=True, help_text="the start of the parent comment")
    activityId = serializers.CharField(allow_null=True)
    activityLogUrl = serializers.CharField(allow_null=True, help_text="the execution log behind an agent's comment")
    createdAt = serializers.DateTimeField()


class TaskCommentOut(_CommentFields):
    taskId = serializers.CharField()


class RequirementCommentOut(_CommentFields):
    requirementId = serializers.CharField()


class TaskCommentsOut(serializers.Serializer):
    comments = TaskCommentOut(many=True)


class RequirementCommentsOut(serializers.Serializer):
    comments = RequirementCommentOut(many=True)


class HistoryEntityOut(serializers.Serializer):
    kind = serializers.CharField(help_text="task or requirement")
    id = serializers.CharField()


class HistoryActorOut(serializers.Serializer):
    kind = serializers.CharField(help_text="user (a person), agent or system")
    id = serializers.CharField(help_text="a user's pk, an agent's id, or system")
    name = serializers.CharField()


class StatusChangeOut(serializers.Serializer):
    entity = HistoryEntityOut()
    # ``from`` is a Python keyword: the field is declared under it below.
    to = serializers.CharField()
    who = HistoryActorOut()
    at = serializers.DateTimeField()
    note = serializers.CharField(allow_blank=True, help_text="the note or reason given (a rejection's reason)")


StatusChangeOut._declared_fields["from"] = serializers.CharField(allow_null=True, help_text="null when it was filed")


class StatusHistoryOut(serializers.Serializer):
    history = StatusChangeOut(many=True)
    totalCount = serializers.IntegerField(help_text="counted up to 10,000")
    totalCountCapped = serializers.BooleanField(help_text="more than totalCount match (shown as 10,000+)")
