"""Response shapes of the notification and approval endpoints, for the OpenAPI schema.
They describe what ``services.serialize_notification`` / ``serialize_approval`` already
answer; the views do not serialise through them."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from .models import Approval
from .registry import PRIORITIES, NotificationType

NOTIFICATION_TYPES = [t.value for t in NotificationType]


class NotificationOut(serializers.Serializer):
    id = serializers.CharField()
    type = serializers.ChoiceField(choices=NOTIFICATION_TYPES)
    title = serializers.CharField()
    body = serializers.CharField(allow_blank=True)
    priority = serializers.ChoiceField(choices=list(PRIORITIES))
    read = serializers.BooleanField()
    actionType = serializers.CharField(allow_null=True, help_text="navigate | open_chat | none (the type's default)")
    actionTarget = serializers.JSONField(allow_null=True, help_text="where the action leads, e.g. {taskId}")
    metadata = serializers.DictField()
    createdAt = serializers.DateTimeField()


class NotificationListOut(serializers.Serializer):
    notifications = NotificationOut(many=True)
    totalCount = serializers.IntegerField(help_text="notifications matching the filter, counted up to 10,000")
    totalCountCapped = serializers.BooleanField(help_text="more than totalCount match (shown as 10,000+)")
    unreadCount = serializers.IntegerField(help_text="all of the user's unread notifications")


class MarkAllReadOut(serializers.Serializer):
    updated = serializers.IntegerField(help_text="notifications that were unread")


class ApprovalOut(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    options = inline_serializer(  # an inline one: a declared field named label would shadow Field.label
        name="ApprovalOptionOut",
        fields={
            "id": serializers.CharField(),
            "label": serializers.CharField(required=False),
            "description": serializers.CharField(required=False),
        },
        many=True,
    )
    allowFreeform = serializers.BooleanField(help_text="an answer outside the options is accepted")
    status = serializers.ChoiceField(choices=Approval.State.choices)
    selectedOption = serializers.CharField(allow_null=True)
    comment = serializers.CharField(allow_blank=True)
    agentId = serializers.CharField(allow_null=True, help_text="the agent that asked")
    mailboxItemId = serializers.CharField(allow_null=True, help_text="the mailbox item waiting for the answer")
    createdAt = serializers.DateTimeField()
    answeredAt = serializers.DateTimeField(allow_null=True)


class ApprovalListOut(serializers.Serializer):
    approvals = ApprovalOut(many=True)
    totalCount = serializers.IntegerField(help_text="counted up to 10,000")
    totalCountCapped = serializers.BooleanField(help_text="more than totalCount match (shown as 10,000+)")
