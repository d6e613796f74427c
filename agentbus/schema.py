"""OpenAPI for the AgentBus's async views, which drf-spectacular cannot see: a
postprocessing hook (``agentbus.schema.document_async_views``) for
``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.generators import SchemaGenerator
from rest_framework.request import Request

from markus.core.schema import IDEMPOTENCY_KEY_PLAIN

_ERROR = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
_MESSAGE = {
    "type": "object",
    "properties": {
        "streamId": {"type": "string"},
        "sequence": {"type": "integer"},
        "sender": {"type": "string"},
        "senderName": {"type": "string"},
        "senderTeam": {
            "type": "object",
            "nullable": True,
            "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
        },
        "topic": {"type": "string"},
        "payload": {"type": "object"},
        "createdAt": {"type": "string", "format": "date-time"},
    },
}
_SECURITY: list[dict[str, list[str]]] = [{"tokenAuth": []}, {"agentBearer": []}, {"cookieAuth": []}]


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): {"description": "Error", **_json(_ERROR)} for c in codes}


def _query(name: str, kind: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": kind}, "description": description}


def document_async_views(
    result: dict[str, Any], generator: SchemaGenerator, request: Request | None, public: bool
) -> dict[str, Any]:
    paths = result.setdefault("paths", {})
    paths["/api/agents/{agent_id}/agentbus/inbox"] = {
        "get": {
            "operationId": "agents_agentbus_inbox",
            "tags": ["agentbus"],
            "summary": "Wait for messages in the agent's inbox (blocks up to timeout_seconds)",
            "description": "Self-only for agent tokens; a user who may see the agent may read it. A cursor "
            "that cannot be used is ignored (the answer over-delivers, never under-delivers).",
            "parameters": [
                {"name": "agent_id", "in": "path", "required": True, "schema": {"type": "string"}},
                _query("after_cursor", "string", "next_cursor of an earlier answer (or of drain)"),
                _query("timeout_seconds", "number", "0..3600, default 30; 0 answers at once"),
                _query("limit", "integer", "1..500, default 100"),
            ],
            "responses": {
                "200": {
                    "description": "What arrived, and where to resume",
                    **_json(
                        {
                            "type": "object",
                            "required": ["messages", "next_cursor", "timed_out"],
                            "properties": {
                                "messages": {"type": "array", "items": _MESSAGE},
                                "next_cursor": {"type": "string"},
                                "timed_out": {"type": "boolean"},
                            },
                        }
                    ),
                },
                **_errors(400, 401, 404),
            },
            "security": _SECURITY,
        }
    }
    paths["/api/agentbus/request"] = {
        "post": {
            "operationId": "agentbus_request",
            "tags": ["agentbus"],
            "summary": "Open a stream, append, wait for the reply stream (replyTo) to be closed, close",
            "description": (
                "Sent again with its `Idempotency-Key` (the sender's own), nothing is asked twice: the first "
                "request's reply is waited for, answered with `Idempotent-Replayed: true`; the key with another "
                "message or recipient is a 422."
            ),
            "parameters": [IDEMPOTENCY_KEY_PLAIN],
            "requestBody": {
                "required": True,
                **_json(
                    {
                        "type": "object",
                        "required": ["sender", "recipient", "payload"],
                        "properties": {
                            "sender": {"type": "string"},
                            "recipient": {"type": "string"},
                            "payload": {"type": "object"},
                            "topic": {"type": "string"},
                            "timeoutSeconds": {"type": "number"},
                        },
                    }
                ),
            },
            "responses": {
                "200": {
                    "description": "The request, the reply and whether it timed out",
                    **_json(
                        {
                            "type": "object",
                            "properties": {
                                "streamId": {"type": "string"},
                                "request": _MESSAGE,
                                "replyStreamId": {"type": "string", "nullable": True},
                                "reply": {"type": "array", "items": _MESSAGE},
                                "timed_out": {"type": "boolean"},
                            },
                        }
                    ),
                },
                **_errors(400, 401, 403, 404, 409, 422, 429),
            },
            "security": _SECURITY,
        }
    }
    return result
