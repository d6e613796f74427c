"""OpenAPI description helpers: the agent bearer-token extension, shared response
shapes, and documentation of the plain (async) Django views that drf-spectacular cannot
see on its own."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import serializers


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "markus.agents.auth.AgentTokenAuthentication"
    name = "agentBearer"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An agent's API token (acts only as that agent)"}


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


ERRORS = {
    400: ErrorSerializer,
    401: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    409: ErrorSerializer,
    413: ErrorSerializer,
}


def errors(*codes: int) -> dict[int, type[ErrorSerializer]]:
    return {code: ERRORS[code] for code in codes}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


_ERROR = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}


def document_plain_views(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Postprocessing hook: add the async views (chat) to the schema."""
    paths = result.setdefault("paths", {})
    paths["/api/agents/{agent_id}/chat"] = {
        "post": {
            "operationId": "agents_chat",
            "tags": ["agents"],
            "summary": "Chat with an agent: enqueue a human_chat and wait for the reply",
            "parameters": [
                {"name": "agent_id", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "Accept",
                    "in": "header",
                    "description": "text/event-stream: the reply as server-sent events (queued, delta..., done)",
                    "schema": {"type": "string", "enum": ["application/json", "text/event-stream"]},
                },
            ],
            "requestBody": {
                "required": True,
                **_json(
                    {
                        "type": "object",
                        "required": ["text"],
                        "properties": {"text": {"type": "string", "minLength": 1}, "sessionId": {"type": "string"}},
                    }
                ),
            },
            "responses": {
                "200": {
                    "description": "The reply",
                    "content": {
                        **_json(
                            {
                                "type": "object",
                                "properties": {
                                    "reply": {"type": "string"},
                                    "mailboxItemId": {"type": "string"},
                                    "sessionId": {"type": "string", "nullable": True},
                                },
                            }
                        )["content"],
                        "text/event-stream": {
                            "schema": {
                                "type": "string",
                                "description": (
                                    "events queued {mailboxItemId, sessionId}, delta {text}, "
                                    "done {reply, mailboxItemId, sessionId, pending?}"
                                ),
                            }
                        },
                    },
                },
                "202": {
                    "description": "Not answered within the wait; the item stays queued",
                    **_json(
                        {
                            "type": "object",
                            "properties": {
                                "reply": {"type": "string", "nullable": True},
                                "mailboxItemId": {"type": "string"},
                                "sessionId": {"type": "string", "nullable": True},
                                "pending": {"type": "boolean"},
                            },
                        }
                    ),
                },
                **{str(c): {"description": "Error", **_json(_ERROR)} for c in (400, 401, 403, 404, 413)},
                "406": {"description": "Accept allows neither JSON nor an event stream", **_json(_ERROR)},
                "409": {"description": "The agent is paused, stopped or external", **_json(_ERROR)},
            },
            "security": [{"tokenAuth": []}, {"agentBearer": []}],
        }
    }
    return result
