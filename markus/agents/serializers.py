"""Request and response shapes of the agent endpoints (for validation docs and the schema)."""

from __future__ import annotations

from rest_framework import serializers

from .models import Agent


class AgentCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    role = serializers.CharField(max_length=200, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=Agent.Kind.choices, required=False)
    id = serializers.RegexField(r"^[A-Za-z0-9_.-]{1,64}$", required=False)
    teamId = serializers.CharField(required=False, allow_null=True)


class AgentOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()
    kind = serializers.ChoiceField(choices=Agent.Kind.choices)
    status = serializers.ChoiceField(choices=Agent.RunStatus.choices)
    teamId = serializers.CharField(allow_null=True)
    ownerId = serializers.IntegerField(allow_null=True)
    createdAt = serializers.DateTimeField()
    pendingInbox = serializers.IntegerField(required=False, help_text="messages waiting in the AgentBus inbox")
    pendingInboxCount = serializers.IntegerField(required=False, help_text="with ?inbox=1 on the list")


class AgentCreatedOut(AgentOut):
    token = serializers.CharField(help_text="the agent's API token; shown only once")
