"""OpenAPI description helpers: the agent bearer-token extension, shared response
shapes, and documentation of the plain (async) Django views that drf-spectacular cannot
see on its own."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from markus.core.limits import IDEMPOTENCY_KEY_MAX_CHARS


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "markus.agents.auth.BearerAuthentication"
    name = "agentBearer"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent's API token (acts only as that agent), or a user's",
        }


class ErrorSerializer(serializers.Serializer):
    """Every error of the API: ``{"detail", "code", "fields"?}`` (``markus.core.api``)."""

    detail = serializers.CharField(help_text="What went wrong, readable as is.")
    code = serializers.CharField(
        help_text=(
            "invalid, parse_error, not_authenticated, authentication_failed, permission_denied, "
            "not_found, method_not_allowed, not_acceptable, unsupported_media_type, conflict, "
            "payload_too_large, throttled, busy, unavailable, server_error"
        )
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``fields`` is the Serializer's own attribute: the field is added here.
        fields: dict[str, serializers.Field] = dict(super().get_fields())
        fields["fields"] = serializers.DictField(
            required=False,
            child=serializers.JSONField(),
            help_text="A validation error's messages by field (code: invalid): a list of messages, or a nested map.",
        )
        return fields


class ConflictErrorSerializer(ErrorSerializer):
    """A 409; a refused transition lists the statuses allowed from the current one."""

    allowed = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The statuses the object may move to from its current one (an illegal transition).",
    )


class PayloadTooLargeErrorSerializer(ErrorSerializer):
    """A 413: the body is over the limit, stated in ``detail`` and ``limit``."""

    limit = serializers.IntegerField(help_text="The largest request body accepted, in bytes.")


class ThrottledErrorSerializer(ErrorSerializer):
    """A 429: a pace or a cap is reached; ``Retry-After`` says when to try again, ``limit``
    states it."""

    limit = serializers.IntegerField(help_text="The pace or cap that was reached.")


ERRORS: dict[int, type[ErrorSerializer]] = {
    400: ErrorSerializer,
    401: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    409: ConflictErrorSerializer,
    413: PayloadTooLargeErrorSerializer,
    422: ErrorSerializer,
    429: ThrottledErrorSerializer,
}

# The ``Idempotency-Key`` of a request that stores an item or a message
# (``mailbox.idempotency``): as the DRF views' parameter and as the plain views' (the
# chat, the bus request), one text and one schema.
_KEY_HELP = (
    "Sent again with the same key (its answer was lost), the request stores nothing new and is answered "
    "as the first send (Idempotent-Replayed: true); the key is the caller's own, per agent, kept as long "
    "as the item. The same key with another request: 422 (idempotency_key_reused). "
    f"1 to {IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters (a UUID will do)."
)
_KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX_CHARS}
IDEMPOTENCY_KEY = OpenApiParameter("Idempotency-Key", _KEY_SCHEMA, OpenApiParameter.HEADER, description=_KEY_HELP)
IDEMPOTENCY_KEY_PLAIN = {"name": "Idempotency-Key", "in": "header", "description": _KEY_HELP, "schema": _KEY_SCHEMA}


def errors(*codes: int) -> dict[int, type[ErrorSerializer]]:
    return {code: ERRORS[code] for code in codes}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


# The plain views' errors, as ErrorSerializer documents them for the DRF views.
_ERROR = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "fields": {"type": "object", "additionalProperties": {}},
    },
    "required": ["detail", "code"],
}
_TOO_LARGE = {
    "type": "object",
    "properties": {**_ERROR["properties"], "limit": {"type": "integer"}},  # type: ignore[dict-item]
    "required": ["detail", "code", "limit"],
}


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
                IDEMPOTENCY_KEY_PLAIN,
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
                                "required": ["reply", "mailboxItemId", "sessionId"],
                                "properties": {
                                    "reply": {"type": "string"},
                                    "mailboxItemId": {"type": "string"},
                                    "sessionId": {"type": "string", "description": "the session the reply is in"},
                                },
                            }
                        )["content"],
                        "text/event-stream": {
                            "schema": {
                                "type": "string",
                                "description": (
                                    "events queued {mailboxItemId, sessionId}, "
                                    "delta {text, run} (a new run starts the reply over), "
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
                            "required": ["reply", "mailboxItemId", "sessionId", "pending"],
                            "properties": {
                                "reply": {"type": "string", "nullable": True, "description": "null: not yet"},
                                "mailboxItemId": {"type": "string", "description": "the queued human_chat item"},
                                "sessionId": {"type": "string"},
                                "pending": {"type": "boolean", "enum": [True]},
                            },
                        }
                    ),
                },
                **{str(c): {"description": "Error", **_json(_ERROR)} for c in (400, 401, 403, 404)},
                "413": {"description": "The body is over the limit", **_json(_TOO_LARGE)},
                "406": {"description": "Accept allows neither JSON nor an event stream", **_json(_ERROR)},
                "409": {"description": "The agent is paused, stopped or external", **_json(_ERROR)},
                "422": {"description": "The Idempotency-Key came with another request", **_json(_ERROR)},
            },
            "security": [{"tokenAuth": []}, {"agentBearer": []}],
        },
        "get": {
            "operationId": "agents_chat_resume",
            "tags": ["agents"],
            "summary": "Resume the reply stream of one's own chat after a dropped connection",
            "description": (
                "Last-Event-ID (or ?lastEventId=) names the last event received, <mailboxItemId>:<n>: the "
                "stream goes on after it (the pieces missed, then live, then done), each event once. With "
                "Accept: application/json, the plain answer when the reply comes (200, or 202 pending)."
            ),
            "parameters": [
                {"name": "agent_id", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                {"name": "lastEventId", "in": "query", "schema": {"type": "string"}},
            ],
            "responses": {
                "200": {
                    "description": "The rest of the stream (text/event-stream), or the reply (JSON)",
                    "content": {
                        **_json(
                            {
                                "type": "object",
                                "required": ["reply", "mailboxItemId", "sessionId"],
                                "properties": {
                                    "reply": {"type": "string"},
                                    "mailboxItemId": {"type": "string"},
                                    "sessionId": {"type": "string"},
                                    "mergedInto": {"type": "string"},
                                },
                            }
                        )["content"],
                        "text/event-stream": {
                            "schema": {
                                "type": "string",
                                "description": "the events after Last-Event-ID: delta..., done (as the chat's)",
                            }
                        },
                    },
                },
                "202": {
                    "description": "JSON: not answered within the wait",
                    **_json(
                        {
                            "type": "object",
                            "required": ["reply", "mailboxItemId", "sessionId", "pending"],
                            "properties": {
                                "reply": {"type": "string", "nullable": True},
                                "mailboxItemId": {"type": "string"},
                                "sessionId": {"type": "string"},
                                "pending": {"type": "boolean", "enum": [True]},
                            },
                        }
                    ),
                },
                **{str(c): {"description": "Error", **_json(_ERROR)} for c in (400, 401, 403, 404, 406)},
                "409": {"description": "The pieces after that event are no longer kept", **_json(_ERROR)},
            },
            "security": [{"tokenAuth": []}, {"agentBearer": []}],
        },
    }
    return result


def document_bad_input(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Postprocessing hook, after the others: every operation of the API documents its
    400. Any request can be refused before its view does its work (a NUL byte or a
    lone surrogate in a query parameter's name or value, a paging parameter that is not
    a number), also one whose view takes no input of its own."""
    error = {"$ref": "#/components/schemas/Error"}
    for path, operations in result.get("paths", {}).items():
        if not path.startswith("/api/"):
            continue
        for operation in operations.values():
            responses = operation.get("responses") if isinstance(operation, dict) else None
            if responses is not None and "400" not in responses:
                responses["400"] = {
                    "description": "Bad input: a query parameter refused at the edge",
                    **_json(error),
                }
    return result
