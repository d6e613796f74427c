"""Request and response shapes of the agent endpoints (for validation docs and the schema)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.request import Request

from markus.core.api import StringField

from .models import Agent, Team


def _string(key: str, help_text: str) -> StringField:
    return StringField(
        required=False, allow_null=True, error_messages={"invalid": f"{key} must be a string"}, help_text=help_text
    )


class TeamIdField(StringField):
    """A team id; any falsy value (null, "", 0, false, [] or {}) means no team, as it
    always has. Any other non-string names no team."""

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is not empty and not data:
            return (True, None)
        return super().validate_empty_values(data)


class AgentCreateInput(serializers.Serializer):
    """Checks the team and the types; ``agent_create`` checks the values (its messages
    are the same wherever an agent is created). Declared in the order they are checked:
    the first bad field answers."""

    teamId = TeamIdField(required=False, allow_null=True, error_messages={"invalid": "no such team"})
    name = _string("name", "required; at most 200 characters are kept")
    role = _string("role", "at most 200 characters are kept")
    kind = _string("kind", f"one of {', '.join(Agent.Kind.values)}; default {Agent.Kind.INTERNAL}")
    id = _string("id", "letters, digits, '_', '-' and '.', at most 64 characters; default: generated")

    def validate_teamId(self, value: str | None) -> Team | None:
        """A team the user owns or belongs to (any team for staff); else "no such team"."""
        if not value:
            return None
        request: Request = self.context["request"]
        user = request.user
        team = Team.objects.filter(id=value).first()
        if (
            team is None
            or user.id is None
            or not (user.is_staff or team.owner_id == user.id or team.members.filter(id=user.id).exists())
        ):
            raise serializers.ValidationError("no such team")
        return team


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
