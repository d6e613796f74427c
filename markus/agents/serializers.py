"""Request and response shapes of the agent endpoints (for validation docs and the schema)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.request import Request

from markus.core.api import StrictIntegerField, StringField
from markus.usage.serializers import BudgetInput

from .models import HEARTBEAT_MAX_MINUTES, HEARTBEAT_MIN_MINUTES, Agent, Team


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
        return seen_team(self.context["request"], value)


def seen_team(request: Request, value: str | None) -> Team | None:
    """A team the user owns or belongs to (any team for staff); else "no such team"."""
    if not value:
        return None
    user = request.user
    team = Team.objects.filter(id=value).first()
    if (
        team is None
        or user.id is None
        or not (user.is_staff or team.owner_id == user.id or team.members.filter(id=user.id).exists())
    ):
        raise serializers.ValidationError("no such team")
    return team


def _hour(key: str, help_text: str) -> StrictIntegerField:
    message = f"{key} must be an hour from 0 to 23 (or null for all day)"
    return StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=23,
        error_messages={"invalid": message, "min_value": message, "max_value": message},
        help_text=help_text,
    )


_INTERVAL_RANGE = (
    f"heartbeatIntervalMinutes must be between {HEARTBEAT_MIN_MINUTES} and {HEARTBEAT_MAX_MINUTES} (5 min to 24 h)"
)


class ActiveHoursField(serializers.JSONField):
    """``{"start": 8, "end": 20}``: whole hours in the agent's time zone (the end
    excluded; a start after the end runs past midnight), or null for all day."""

    MESSAGE = 'activeHours must be null or {"start": H, "end": H} with hours from 0 to 23'

    def to_internal_value(self, data: Any) -> Any:
        if data is None:
            return None
        hours = data if isinstance(data, dict) else {}
        if set(hours) != {"start", "end"} or not all(
            isinstance(h, int) and not isinstance(h, bool) and 0 <= h <= 23 for h in hours.values()
        ):
            raise serializers.ValidationError(self.MESSAGE)
        return {"start": hours["start"], "end": hours["end"]}


class ActiveHoursOut(serializers.Serializer):
    start = serializers.IntegerField(min_value=0, max_value=23)
    end = serializers.IntegerField(min_value=0, max_value=23)


class AgentPatchInput(serializers.Serializer):
    """What the agent's operator changes: its name and role, its team, its rhythm; only
    the fields sent change."""

    name = _string("name", "not empty; at most 200 characters are kept")
    role = _string("role", "at most 200 characters are kept")
    teamId = TeamIdField(
        required=False,
        allow_null=True,
        error_messages={"invalid": "no such team"},
        help_text="move it to this team (null: no team); where the caller may create an agent",
    )
    activeHours = ActiveHoursField(
        required=False,
        allow_null=True,
        help_text='{"start": 8, "end": 20}: heartbeats only in these hours of the agent\'s time zone; null: all day',
    )

    toolServers = serializers.ListField(
        child=serializers.CharField(max_length=32),
        required=False,
        max_length=20,
        help_text="the names of the tool servers (MCP) attached to it, all of them (its team's are added): "
        "those offered to its team or to all, and those attached already (staff: any)",
    )
    budget = BudgetInput(
        required=False,
        help_text='its spending limits, {"dailyTokens": N, "monthlyCost": X} (either or both; null: no limit)',
    )

    heartbeatIntervalMinutes = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=HEARTBEAT_MIN_MINUTES,
        max_value=HEARTBEAT_MAX_MINUTES,
        error_messages={
            "invalid": "heartbeatIntervalMinutes must be an integer number of minutes",
            "min_value": _INTERVAL_RANGE,
            "max_value": _INTERVAL_RANGE,
        },
        help_text=f"minutes between heartbeats, {HEARTBEAT_MIN_MINUTES} to {HEARTBEAT_MAX_MINUTES}; "
        "null: the default (MARKUS_HEARTBEAT_DEFAULT_MINUTES, 6 h)",
    )
    timezone = _string("timezone", 'IANA time zone name, e.g. "Europe/Berlin"; "" or null: the server\'s')
    heartbeatActiveStart = _hour("heartbeatActiveStart", "first hour (0-23, the agent's time zone) of heartbeats")
    heartbeatActiveEnd = _hour(
        "heartbeatActiveEnd",
        "the hour (0-23) heartbeats stop; before the start: past midnight; null with the start: all day",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError(f"nothing to change: send any of {', '.join(self.fields)}")
        for key in ("name", "role"):
            if key in attrs:
                if attrs[key] is None:
                    raise serializers.ValidationError(f"{key} must be a string")
                attrs[key] = attrs[key].strip()[:200]
        if "name" in attrs and not attrs["name"]:
            raise serializers.ValidationError("name must not be empty")
        if "activeHours" in attrs and ({"heartbeatActiveStart", "heartbeatActiveEnd"} & set(attrs)):
            raise serializers.ValidationError("send activeHours or heartbeatActiveStart/heartbeatActiveEnd, not both")
        return attrs

    def validate_teamId(self, value: str | None) -> Team | None:
        return seen_team(self.context["request"], value)


class StallOut(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["tool_failing", "long_focus", "waiting_on_person"])
    reason = serializers.CharField(help_text="why it has made no progress, naming no content")
    since = serializers.DateTimeField(help_text="when the stall began")


class AgentOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField()
    kind = serializers.ChoiceField(choices=Agent.Kind.choices)
    status = serializers.ChoiceField(choices=Agent.RunStatus.choices)
    teamId = serializers.CharField(allow_null=True)
    ownerId = serializers.IntegerField(allow_null=True)
    createdAt = serializers.DateTimeField()
    heartbeatIntervalMinutes = serializers.IntegerField(help_text="minutes between heartbeats (the default if unset)")
    heartbeatIntervalDefault = serializers.BooleanField(help_text="no interval of its own: the default applies")
    timezone = serializers.CharField(help_text="the agent's IANA time zone")
    heartbeatActiveStart = serializers.IntegerField(allow_null=True)
    heartbeatActiveEnd = serializers.IntegerField(allow_null=True)
    activeHours = ActiveHoursOut(allow_null=True, help_text="the active hours as one object; null: all day")
    nextHeartbeatAt = serializers.DateTimeField(allow_null=True, help_text="null: at the next beat tick")
    heartbeatSleepDepth = serializers.IntegerField(help_text="each level doubles the interval (at most 24 h)")
    toolServers = serializers.ListField(
        child=serializers.CharField(), help_text="tool servers attached to it (not its team's: GET …/tools)"
    )
    stall = StallOut(
        allow_null=True,
        help_text="null, or why it has made no progress for a while (attention.stalls): the same tool failing "
        "MARKUS_STALL_TOOL_FAILURES times in a row, the same item past MARKUS_STALL_SECONDS, a person's answer "
        "awaited past MARKUS_STALL_WAIT_SECONDS",
    )
    pendingInbox = serializers.IntegerField(required=False, help_text="messages waiting in the AgentBus inbox")
    pendingInboxCount = serializers.IntegerField(required=False, help_text="with ?inbox=1 on the list")


class AgentCreatedOut(AgentOut):
    token = serializers.CharField(help_text="the agent's API token; shown only once")


class AgentTokenRevokedOut(serializers.Serializer):
    id = serializers.CharField()
    revoked = serializers.BooleanField(help_text="always true: the agent has no token now")
