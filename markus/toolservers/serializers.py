"""What ``/api/tool-servers/`` reads and answers. Secrets (``env``, ``headers``) are
write-only: an answer names their keys, never their values."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from markus.core.api import StrictIntegerField

from .models import Policy, Transport

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
NAME_MAX = 32
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
MAX_ARGS, MAX_ARG_CHARS = 64, 2_000
MAX_SECRETS, MAX_SECRET_CHARS = 64, 8_000
MAX_POLICIES = 500
TIMEOUT_MIN, TIMEOUT_MAX = 1, 600
FIELDS = (
    "name",
    "description",
    "transport",
    "command",
    "args",
    "env",
    "url",
    "headers",
    "timeoutSeconds",
    "enabled",
    "policies",
    "idempotent",
    "teams",
    "offeredTo",
    "offeredToAll",
    "ownerId",
)


def _string_map(value: Any, field: str, key: re.Pattern[str], what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise serializers.ValidationError(f"{field} must be an object of {what} to string values")
    if len(value) > MAX_SECRETS:
        raise serializers.ValidationError(f"{field}: at most {MAX_SECRETS} entries")
    for k, v in value.items():
        if not key.match(k):
            raise serializers.ValidationError(f"{field}: {k[:80]!r} is not a valid {what[:-1]}")
        if not isinstance(v, str):
            raise serializers.ValidationError(f"{field}: the value of {k!r} must be a string")
        if len(v) > MAX_SECRET_CHARS:
            raise serializers.ValidationError(f"{field}: the value of {k!r} is over {MAX_SECRET_CHARS:,} characters")
    return value


class ToolServerInput(serializers.Serializer):
    """A tool server to register (POST: ``name``, ``transport`` and its ``command`` or
    ``url``) or to change (PATCH: any of the fields)."""

    name = serializers.CharField(
        max_length=NAME_MAX, help_text="lowercase letters, digits, single hyphens; the tools' prefix"
    )
    description = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, help_text="what it is for; shown to the agent"
    )
    transport = serializers.ChoiceField(
        choices=Transport.choices, error_messages={"invalid_choice": "transport must be stdio or http"}
    )
    command = serializers.CharField(max_length=500, required=False, allow_blank=True, help_text="stdio: executable")
    args = serializers.JSONField(required=False, help_text="stdio: a list of strings")
    env = serializers.JSONField(required=False, help_text="stdio: {NAME: value}; write-only (secret)")
    url = serializers.URLField(
        max_length=1000,
        required=False,
        allow_blank=True,
        help_text="http: the endpoint",
        error_messages={"invalid": "url must be an http(s) URL, e.g. http://localhost:8000/mcp"},
    )
    headers = serializers.JSONField(required=False, help_text="http: {Header: value}; write-only (secret)")
    timeoutSeconds = StrictIntegerField(
        required=False,
        min_value=TIMEOUT_MIN,
        max_value=TIMEOUT_MAX,
        error_messages={
            "invalid": "timeoutSeconds must be an integer number of seconds",
            "min_value": f"timeoutSeconds must be {TIMEOUT_MIN} to {TIMEOUT_MAX}",
            "max_value": f"timeoutSeconds must be {TIMEOUT_MIN} to {TIMEOUT_MAX}",
        },
    )
    enabled = serializers.BooleanField(required=False)
    policies = serializers.JSONField(required=False, help_text='{"<tool>": "auto" | "ask" | "deny" | null (default)}')
    idempotent = serializers.JSONField(
        required=False, help_text='{"<tool>": true | false | null (its idempotentHint)}: made again after a crash'
    )
    teams = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=100,
        help_text="team ids: attached to every agent of these teams (and offered to them)",
    )
    offeredTo = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=100,
        help_text="team ids: whoever controls an agent of these teams may attach it",
    )
    offeredToAll = serializers.BooleanField(required=False, help_text="whoever controls any agent may attach it")
    ownerId = StrictIntegerField(
        required=False,
        allow_null=True,
        help_text="a staff user's id: approves calls outside the teams it is offered to; default: who registers it",
        error_messages={"invalid": "ownerId must be a user's id (an integer) or null"},
    )

    def validate_name(self, value: str) -> str:
        if not NAME.match(value):
            raise serializers.ValidationError(
                "name: lowercase letters, digits and single hyphens (no underscores), e.g. git or issue-tracker"
            )
        return value

    def validate_args(self, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise serializers.ValidationError("args must be a list of strings")
        if len(value) > MAX_ARGS or any(len(a) > MAX_ARG_CHARS for a in value):
            raise serializers.ValidationError(f"args: at most {MAX_ARGS} of at most {MAX_ARG_CHARS:,} characters")
        return value

    def validate_env(self, value: Any) -> dict[str, str]:
        return _string_map(value, "env", ENV_KEY, "variable names")

    def validate_headers(self, value: Any) -> dict[str, str]:
        return _string_map(value, "headers", HEADER_NAME, "header names")

    def validate_policies(self, value: Any) -> dict[str, str | None]:
        allowed = ", ".join(Policy.values)
        if not isinstance(value, dict):
            raise serializers.ValidationError(f'policies must be an object {{"<tool>": {allowed} or null}}')
        if len(value) > MAX_POLICIES:
            raise serializers.ValidationError(f"policies: at most {MAX_POLICIES} tools")
        for tool, policy in value.items():
            if policy is not None and policy not in Policy.values:
                raise serializers.ValidationError(f"policies: {tool[:80]!r} must be one of {allowed} (or null)")
        return value

    def validate_idempotent(self, value: Any) -> dict[str, bool | None]:
        if not isinstance(value, dict):
            raise serializers.ValidationError('idempotent must be an object {"<tool>": true, false or null}')
        if len(value) > MAX_POLICIES:
            raise serializers.ValidationError(f"idempotent: at most {MAX_POLICIES} tools")
        for tool, repeatable in value.items():
            if repeatable is not None and not isinstance(repeatable, bool):
                raise serializers.ValidationError(f"idempotent: {tool[:80]!r} must be true or false (or null)")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.partial and not attrs:
            raise serializers.ValidationError(f"nothing to change: send any of {', '.join(self.fields)}")
        return attrs


class ListedToolOut(serializers.Serializer):
    name = serializers.CharField(help_text="the server's name of the tool")
    offeredAs = serializers.CharField(help_text='<server>__<tool>, the name the LLM calls ("": not offered)')
    notOffered = serializers.CharField(
        help_text="why it is not offered to any agent (an LLM API would refuse its name or its input schema); "
        '"" when it is'
    )
    description = serializers.CharField()
    policy = serializers.ChoiceField(choices=Policy.choices)
    defaultPolicy = serializers.ChoiceField(choices=Policy.choices, help_text="from its readOnlyHint")
    readOnly = serializers.BooleanField()
    repeatable = serializers.BooleanField(
        help_text="a call in flight at a crash is made again: the operator's idempotent, else its idempotentHint"
    )


class ToolServerOut(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    transport = serializers.ChoiceField(choices=Transport.choices)
    command = serializers.CharField()
    args = serializers.ListField(child=serializers.CharField())
    envKeys = serializers.ListField(child=serializers.CharField(), help_text="names only: values are never shown")
    url = serializers.CharField()
    headerNames = serializers.ListField(child=serializers.CharField(), help_text="names only")
    timeoutSeconds = serializers.IntegerField()
    enabled = serializers.BooleanField()
    policies = serializers.DictField(child=serializers.CharField())
    idempotent = serializers.DictField(child=serializers.BooleanField())
    ownerId = serializers.IntegerField(allow_null=True, help_text="the staff user who registered it")
    offeredTo = serializers.ListField(child=serializers.CharField(), help_text="teams whose agents may have it")
    offeredToAll = serializers.BooleanField()
    teams = serializers.ListField(child=serializers.CharField())
    agents = serializers.ListField(child=serializers.CharField(), help_text="agents it is attached to")
    state = serializers.CharField(help_text="unknown, ready, failing or disabled: what a worker last saw")
    lastError = serializers.CharField()
    stateAt = serializers.DateTimeField(allow_null=True)
    listedAt = serializers.DateTimeField(allow_null=True)
    tools = ListedToolOut(many=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class ToolServerDeletedOut(serializers.Serializer):
    name = serializers.CharField()
    deleted = serializers.BooleanField()


class ToolServerListOut(serializers.Serializer):
    toolServers = ToolServerOut(many=True)
    totalCount = serializers.IntegerField()


class OfferedToolOut(serializers.Serializer):
    name = serializers.CharField(help_text="the name the LLM calls")
    origin = serializers.CharField(help_text='"built-in" or the tool server\'s name')
    description = serializers.CharField()
    policy = serializers.ChoiceField(choices=Policy.choices, help_text="built-in tools: auto")
    parameters = serializers.DictField(help_text="its JSON schema")
    onDemand = serializers.BooleanField(
        help_text="a tool server's tool not listed with every request: the agent finds it with tool_search "
        "and loads it with tool_load (past MARKUS_TOOLSERVER_INLINE_TOOLS of them)"
    )


class AgentToolsOut(serializers.Serializer):
    agentId = serializers.CharField()
    scenario = serializers.CharField()
    tools = OfferedToolOut(many=True)
    denied = ListedToolOut(many=True, help_text="tools of its servers that are not offered (policy deny)")
