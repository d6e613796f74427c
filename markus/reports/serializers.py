"""Response shapes of the reports and reminders endpoints."""

from __future__ import annotations

from rest_framework import serializers

from mailbox.registry import STATUS_CHOICES

from .reminders import CANCELLED, FIRED, PENDING

REMINDER_STATES = [(s, s) for s in (PENDING, FIRED, CANCELLED)]


class ReportOut(serializers.Serializer):
    id = serializers.IntegerField()
    agentId = serializers.CharField()
    date = serializers.DateField(help_text="the day reported on, in the agent's time zone")
    content = serializers.CharField(help_text="the report as the agent wrote it (markdown)")
    activity = serializers.DictField(
        help_text="the day's activity digest when the report was written: total, succeeded, failed, tokens, "
        "byType, activities, writtenBy"
    )
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class ReportsOut(serializers.Serializer):
    reports = ReportOut(many=True)
    totalCount = serializers.IntegerField()


class ReminderOut(serializers.Serializer):
    id = serializers.CharField(help_text="the reminder's mailbox item")
    text = serializers.CharField()
    remindAt = serializers.DateTimeField(allow_null=True)
    localTime = serializers.CharField(allow_null=True, help_text="remindAt in the agent's time zone (ISO 8601)")
    timezone = serializers.CharField()
    state = serializers.ChoiceField(
        choices=REMINDER_STATES,
        help_text="pending: waits for its time (cancellable); fired: came due; cancelled: dropped before it fired",
    )
    mailboxStatus = serializers.ChoiceField(choices=STATUS_CHOICES)
    createdAt = serializers.DateTimeField(allow_null=True)


class RemindersOut(serializers.Serializer):
    reminders = ReminderOut(many=True)
    totalCount = serializers.IntegerField(help_text="all the agent's reminders, in every state")


class ReminderCancelledOut(serializers.Serializer):
    id = serializers.CharField()
    state = serializers.ChoiceField(choices=REMINDER_STATES)
    mailboxStatus = serializers.ChoiceField(choices=STATUS_CHOICES)
