"""Request and response shapes of the mailbox endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from markus.core.api import StrictIntegerField, StringField
from markus.core.limits import CHAT_TEXT_MAX_CHARS

from .registry import MAILBOX_TYPE_REGISTRY, MailboxType, Status, category_choices, type_choices

STATUS_CHOICES = [(s.value, s.value) for s in Status]

# The messages of ``services.check_enqueue``, which guards every other way in.
_KNOWN_TYPES = ", ".join(t.value for t in MAILBOX_TYPE_REGISTRY)
_NO_TYPE = f"unknown sourceType None; expected one of: {_KNOWN_TYPES}"
_PAYLOAD = "payload must be an object"
_PRIORITY = "priority must be an integer from 0 (critical) to 4 (background)"
_METADATA = "metadata must be an object"


def _string(key: str, **kwargs: Any) -> StringField:
    message = f"payload.{key} must be a string"
    return StringField(required=False, error_messages={"invalid": message, "null": message}, **kwargs)


class PayloadIn(serializers.Serializer):
    """Checks the keys the mailbox reads; the payload is stored as sent, other keys too."""

    summary = _string("summary")
    content = _string("content")
    extra = serializers.DictField(
        required=False, allow_null=True, error_messages={"not_a_dict": "payload.extra must be an object"}
    )
    # Ids are strings; a number here would silently escape dedup and consolidation.
    taskId = _string("taskId", allow_null=True)
    requirementId = _string("requirementId", allow_null=True)

    def to_internal_value(self, data: Any) -> Any:
        super().to_internal_value(data)  # raises on a bad known key
        return data

    def validate(self, attrs: Any) -> Any:
        channel = (attrs.get("extra") or {}).get("channelKey")
        if channel is not None and not isinstance(channel, str):
            raise serializers.ValidationError({"extra": "payload.extra.channelKey must be a string"})
        return attrs


class EnqueueInput(serializers.Serializer):
    # Declared in the order they are checked: the first bad field answers.
    metadata = serializers.DictField(required=False, allow_null=True, error_messages={"not_a_dict": _METADATA})
    sourceType = serializers.ChoiceField(
        choices=type_choices(),
        error_messages={
            "invalid_choice": "unknown sourceType {input!r}; expected one of: " + _KNOWN_TYPES,
            "required": _NO_TYPE,
            "null": _NO_TYPE,
        },
    )
    payload = PayloadIn(error_messages={"invalid": _PAYLOAD, "required": _PAYLOAD, "null": _PAYLOAD})
    priority = StrictIntegerField(
        min_value=0,
        max_value=4,
        required=False,
        allow_null=True,
        error_messages={"invalid": _PRIORITY, "min_value": _PRIORITY, "max_value": _PRIORITY},
        help_text="0 critical … 4 background; default from the registry",
    )

    def validate(self, attrs: Any) -> Any:
        # A person's chat is bounded as the chat endpoint bounds its text.
        content = attrs["payload"].get("content")
        if attrs["sourceType"] == MailboxType.HUMAN_CHAT and isinstance(content, str):
            if len(content) > CHAT_TEXT_MAX_CHARS:
                raise serializers.ValidationError(
                    {"payload": f"payload.content is longer than {CHAT_TEXT_MAX_CHARS} characters"}
                )
        return attrs


class _ItemFields(serializers.Serializer):
    """What every view of a mailbox item shows."""

    id = serializers.CharField()
    sourceType = serializers.ChoiceField(choices=type_choices())
    category = serializers.ChoiceField(choices=category_choices())
    # The metaclass moves declared fields off the class; the stubs see Field.label.
    label = serializers.CharField()  # type: ignore[assignment]
    priority = serializers.IntegerField()
    status = serializers.ChoiceField(choices=STATUS_CHOICES)
    summary = serializers.CharField()
    queuedAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    completedAt = serializers.DateTimeField(allow_null=True)
    deferredUntil = serializers.DateTimeField(allow_null=True)
    answerDueAt = serializers.DateTimeField(
        allow_null=True, help_text="a delivered chat: when the person's answer from the outside agent is due"
    )
    mergedInto = serializers.CharField(allow_null=True)
    dropReason = serializers.CharField()
    privateTo = serializers.IntegerField(
        allow_null=True,
        help_text="the person whose private chat session the item belongs to (null: not private); "
        "anyone else but staff sees its content as a placeholder",
    )


class ItemOut(_ItemFields):
    agentId = serializers.CharField()
    payload = serializers.DictField()
    metadata = serializers.DictField()
    marks = serializers.DictField(
        help_text="what the system keeps on the item for itself (its retries and crashes, the approval it "
        "is parked for, its batch, the bus stream it answers to); read-only"
    )
    attempts = serializers.IntegerField()


class DecisionBrief(serializers.Serializer):
    id = serializers.CharField()
    decisionType = serializers.CharField()
    reasoning = serializers.CharField()
    createdAt = serializers.DateTimeField()


class ActivityBrief(serializers.Serializer):
    id = serializers.CharField()
    type = serializers.CharField()
    # The metaclass moves declared fields off the class; the stubs see Field.label.
    label = serializers.CharField()  # type: ignore[assignment]
    totalTokens = serializers.IntegerField()
    totalTools = serializers.IntegerField()
    success = serializers.BooleanField()
    outcome = serializers.CharField(
        help_text='"cancelled" (its task left in_progress, or it was cancelled by what arrived) or "stopped" '
        '(the agent was paused or stopped mid-run) for a run that neither completed nor failed; else ""'
    )
    startedAt = serializers.DateTimeField()
    endedAt = serializers.DateTimeField(allow_null=True)


class TimelineEntry(_ItemFields):
    decisions = DecisionBrief(many=True)
    activity = ActivityBrief(allow_null=True)


class TimelineOut(serializers.Serializer):
    queued = ItemOut(many=True, help_text="one page of the queue (queuedLimit), in the order it would be dequeued")
    queueDepth = serializers.IntegerField(help_text="queued items, counted up to 1000")
    queueDepthCapped = serializers.BooleanField(help_text="more than queueDepth are queued (shown as 1000+)")
    queuedNextCursor = serializers.CharField(
        allow_null=True, help_text="pass as queuedAfter for the queue's next page; null on its last page"
    )
    history = TimelineEntry(many=True, help_text="newest first")
    totalCount = serializers.IntegerField(
        allow_null=True, help_text="counted up to 1,000 (then totalCountCapped); null on a page read with before"
    )
    totalCountCapped = serializers.BooleanField(help_text="there are more than totalCount (shown as 1,000+)")
    nextCursor = serializers.CharField(
        allow_null=True, help_text="pass as before for the next page of history; null on the last page"
    )
