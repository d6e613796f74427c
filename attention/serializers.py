"""Response shapes of the attention endpoints."""

from __future__ import annotations

from rest_framework import serializers

from mailbox.serializers import ItemOut

from .models import ActivityLogType, AttentionState, DecisionType


class FocusOut(serializers.Serializer):
    mailboxItemId = serializers.CharField()
    sourceType = serializers.CharField()
    label = serializers.CharField()
    startedAt = serializers.DateTimeField(allow_null=True)


class WorkingMemoryOut(serializers.Serializer):
    key = serializers.CharField()
    content = serializers.CharField()
    updatedAt = serializers.DateTimeField()


class MindOut(serializers.Serializer):
    agentId = serializers.CharField()
    status = serializers.CharField()
    state = serializers.ChoiceField(choices=AttentionState.choices)
    currentFocus = FocusOut(allow_null=True)
    queueDepth = serializers.IntegerField()
    queue = ItemOut(many=True)
    workingMemory = WorkingMemoryOut(many=True)
    waitingForApproval = serializers.BooleanField()
    brain = serializers.CharField(help_text="the LLM provider in use; 'offline' is the rule-based brain")


class DecisionOut(serializers.Serializer):
    id = serializers.CharField()
    agentId = serializers.CharField()
    decisionType = serializers.ChoiceField(choices=DecisionType.choices)
    mailboxItemId = serializers.CharField()
    context = serializers.DictField()
    reasoning = serializers.CharField()
    outcome = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()


class DecisionsOut(serializers.Serializer):
    decisions = DecisionOut(many=True)
    totalCount = serializers.IntegerField()


class ActivityLogOut(serializers.Serializer):
    seq = serializers.IntegerField()
    type = serializers.ChoiceField(choices=ActivityLogType.choices)
    content = serializers.CharField()
    metadata = serializers.DictField(allow_null=True)
    createdAt = serializers.DateTimeField()


class ActivityLogsOut(serializers.Serializer):
    activityId = serializers.CharField()
    logs = ActivityLogOut(many=True)


class ControlOut(serializers.Serializer):
    agentId = serializers.CharField()
    status = serializers.CharField()
