"""Request and response shapes of the mailbox endpoints."""

from __future__ import annotations

from rest_framework import serializers

from .registry import Status, category_choices, type_choices

STATUS_CHOICES = [(s.value, s.value) for s in Status]


class PayloadIn(serializers.Serializer):
    summary = serializers.CharField(required=False, allow_blank=True)
    content = serializers.CharField(required=False, allow_blank=True)
    taskId = serializers.CharField(required=False)
    requirementId = serializers.CharField(required=False)
    extra = serializers.DictField(required=False)


class EnqueueInput(serializers.Serializer):
    sourceType = serializers.ChoiceField(choices=type_choices())
    payload = PayloadIn()
    priority = serializers.IntegerField(
        min_value=0, max_value=4, required=False, help_text="0 critical … 4 background; default from the registry"
    )
    metadata = serializers.DictField(required=False)


class _ItemFields(serializers.Serializer):
    """What every view of a mailbox item shows."""

    id = serializers.CharField()
    sourceType = serializers.ChoiceField(choices=type_choices())
    category = serializers.ChoiceField(choices=category_choices())
    label = serializers.CharField()
    priority = serializers.IntegerField()
    status = serializers.ChoiceField(choices=STATUS_CHOICES)
    summary = serializers.CharField()
    queuedAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    completedAt = serializers.DateTimeField(allow_null=True)
    deferredUntil = serializers.DateTimeField(allow_null=True)
    mergedInto = serializers.CharField(allow_null=True)
    dropReason = serializers.CharField()


class ItemOut(_ItemFields):
    agentId = serializers.CharField()
    payload = serializers.DictField()
    metadata = serializers.DictField()
    attempts = serializers.IntegerField()


class DecisionBrief(serializers.Serializer):
    id = serializers.CharField()
    decisionType = serializers.CharField()
    reasoning = serializers.CharField()
    createdAt = serializers.DateTimeField()


class ActivityBrief(serializers.Serializer):
    id = serializers.CharField()
    type = serializers.CharField()
    label = serializers.CharField()
    totalTokens = serializers.IntegerField()
    totalTools = serializers.IntegerField()
    success = serializers.BooleanField()
    startedAt = serializers.DateTimeField()
    endedAt = serializers.DateTimeField(allow_null=True)


class TimelineEntry(_ItemFields):
    decisions = DecisionBrief(many=True)
    activity = ActivityBrief(allow_null=True)


class TimelineOut(serializers.Serializer):
    queued = ItemOut(many=True, help_text="in the order they would be dequeued")
    queueDepth = serializers.IntegerField()
    history = TimelineEntry(many=True, help_text="newest first")
    totalCount = serializers.IntegerField()
