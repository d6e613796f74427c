"""Request and response shapes of the attention endpoints."""

from __future__ import annotations

from rest_framework import serializers

from mailbox.serializers import ItemOut
from markus.core.api import StringField

from .models import ActivityLogType, AttentionState, DecisionType


class FocusOut(serializers.Serializer):
    mailboxItemId = serializers.CharField()
    sourceType = serializers.CharField()
    # A declared field named like a Field attribute: DRF's metaclass moves it into the
    # declared fields, which the stubs cannot express.
    label = serializers.CharField()  # type: ignore[assignment]
    startedAt = serializers.DateTimeField(allow_null=True)


class WorkingMemoryOut(serializers.Serializer):
    key = serializers.CharField()
    content = serializers.CharField()
    updatedAt = serializers.DateTimeField()


class WaitingCallOut(serializers.Serializer):
    mailboxItemId = serializers.CharField()
    name = serializers.CharField(help_text="<server>__<tool>")
    arguments = serializers.JSONField(help_text="as the LLM gave them (a private conversation's: a placeholder)")
    approvalId = serializers.CharField(allow_null=True)
    since = serializers.DateTimeField()
    privateTo = serializers.IntegerField(allow_null=True)


class WaitingReplyOut(serializers.Serializer):
    mailboxItemId = serializers.CharField()
    streamId = serializers.CharField(help_text="the stream the question was asked on")
    to = serializers.JSONField(help_text="the colleague asked: {id, name}")
    until = serializers.DateTimeField(help_text="when the wait times out")


class MindOut(serializers.Serializer):
    agentId = serializers.CharField()
    status = serializers.CharField()
    state = serializers.ChoiceField(choices=AttentionState.choices)
    currentFocus = FocusOut(allow_null=True)
    queueDepth = serializers.IntegerField(help_text="queued items, counted up to 1000")
    queueDepthCapped = serializers.BooleanField(help_text="more than queueDepth are queued (shown as 1000+)")
    queue = ItemOut(many=True, help_text="one page of the queue (queuedLimit), in dequeue order")
    queuedNextCursor = serializers.CharField(
        allow_null=True, help_text="pass as queuedAfter for the queue's next page; null on its last page"
    )
    workingMemory = WorkingMemoryOut(many=True)
    waitingForApproval = serializers.BooleanField()
    waitingCalls = WaitingCallOut(many=True, help_text="tool calls that wait for a person's approval (ask tools)")
    waitingForReply = WaitingReplyOut(many=True, help_text="items parked until a colleague's reply (await_reply)")
    brain = serializers.CharField(help_text="the LLM provider in use; 'offline' is the rule-based brain")


class DecisionOut(serializers.Serializer):
    id = serializers.CharField()
    agentId = serializers.CharField()
    decisionType = serializers.ChoiceField(choices=DecisionType.choices)
    mailboxItemId = serializers.CharField()
    context = serializers.DictField()  # type: ignore[assignment]  # a declared field, as FocusOut.label
    reasoning = serializers.CharField()
    outcome = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()


class DecisionsOut(serializers.Serializer):
    decisions = DecisionOut(many=True)
    totalCount = serializers.IntegerField(help_text="counted up to 10,000")
    totalCountCapped = serializers.BooleanField(help_text="there are more than totalCount (shown as 10,000+)")


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


# ---------------------------------------------------------------------------- input

CHAT_TEXT_ERROR = "text is required and must be a non-empty string"
CHAT_SESSION_ERROR = "sessionId must be a string"


class ChatIn(serializers.Serializer):
    """The body of ``POST /api/agents/{id}/chat``; extra keys are ignored."""

    text = StringField(
        error_messages={"required": CHAT_TEXT_ERROR, "null": CHAT_TEXT_ERROR, "invalid": CHAT_TEXT_ERROR}
    )
    sessionId = StringField(default=None, allow_null=True, error_messages={"invalid": CHAT_SESSION_ERROR})

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError(CHAT_TEXT_ERROR)
        return value
