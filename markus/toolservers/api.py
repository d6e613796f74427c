"""``/api/tool-servers/`` (staff: register, read, change, delete MCP servers, offer them
to teams; secrets are write-only) and ``GET /api/agents/{id}/tools`` (what an agent is
offered, with policies)."""

from __future__ import annotations

from django.db import transaction
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attention.scenarios import CHAT
from markus.agents import permissions
from markus.core.api import int_param, validated_body
from markus.core.errors import MarkusError
from markus.core.schema import errors

from . import services
from .models import ToolServer
from .offered import WORKING_SCENARIOS
from .serializers import AgentToolsOut, ToolServerDeletedOut, ToolServerInput, ToolServerListOut, ToolServerOut

_HOW = (
    "Staff only. A stdio server is a command every worker starts on first use and runs as the worker's "
    "user; an http server is a Streamable HTTP endpoint, which may not be on this machine or its "
    "networks (loopback, link-local, private, unique-local, unspecified, multicast, reserved addresses, "
    "this server's own ALLOWED_HOSTS: 400) unless MARKUS_TOOLSERVER_ALLOW_PRIVATE is set. `env` and "
    "`headers` are write-only: answers name their keys (`envKeys`, `headerNames`), never their values, "
    "nor does `lastError`. Its tools are offered to the agents it is attached to (`teams` here: every "
    "agent of those teams; or `PATCH /api/agents/{id}/` `toolServers`) as `<name>__<tool>`. Who may "
    "attach it: staff any; whoever controls an agent only a server offered to the agent's team "
    "(`offeredTo`, or its `teams`) or to all (`offeredToAll`). `ownerId`: the staff user who registered "
    "it (the creator unless named); a call of an `ask` tool is approved by the owner of the agent's team "
    "when the server is offered to it, else by this owner (else the first staff user), or by the staff "
    "member who asked. `policies` sets a tool's `auto | ask | deny` (null: back to its default, from "
    "its `readOnlyHint`: read-only tools auto, others ask); `idempotent` `{tool: true | false}` says "
    "whether a call in flight at a crash is made again (null: the tool's `idempotentHint`; a "
    "`readOnlyHint` never)."
)

# What a server's answer reads besides its row.
_RELATED = ("teams", "agents", "offered_to")


def _server(name: str) -> ToolServer:
    server = ToolServer.objects.prefetch_related(*_RELATED).filter(name=name).first()
    if server is None:
        raise Http404("No such tool server.")
    return server


class ToolServerListView(APIView):
    @extend_schema(
        operation_id="tool_servers_list",
        responses={200: ToolServerListOut, **errors(401, 403)},
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        description=_HOW,
    )
    def get(self, request: Request) -> Response:
        permissions.require_staff(request, "tool_servers_list")
        rows = ToolServer.objects.prefetch_related(*_RELATED).order_by("name")
        limit = int_param(request, "limit", 50, lo=1, hi=200)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        return Response(
            {
                "toolServers": [services.server_data(s) for s in rows[offset : offset + limit]],
                "totalCount": rows.count(),
            }
        )

    @extend_schema(
        operation_id="tool_servers_create",
        request=ToolServerInput,
        responses={201: ToolServerOut, **errors(400, 401, 403, 409, 413)},
        description=_HOW,
    )
    def post(self, request: Request) -> Response:
        user = permissions.require_staff(request, "tool_servers_create")
        body = validated_body(request, ToolServerInput)
        with transaction.atomic():
            server = services.server_create(body, owner=user)
        return Response(services.server_data(_server(server.name)), status=status.HTTP_201_CREATED)


class _PartialInput(ToolServerInput):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, partial=True, **kwargs)  # type: ignore[arg-type]


class ToolServerDetailView(APIView):
    @extend_schema(operation_id="tool_servers_retrieve", responses={200: ToolServerOut, **errors(401, 403, 404)})
    def get(self, request: Request, name: str) -> Response:
        permissions.require_staff(request, "tool_servers_retrieve")
        return Response(services.server_data(_server(name)))

    @extend_schema(
        operation_id="tool_servers_partial_update",
        request=ToolServerInput,
        responses={200: ToolServerOut, **errors(400, 401, 403, 404, 413)},
        description=_HOW + " Only the fields sent change; `policies` and `idempotent` merge into those set.",
    )
    def patch(self, request: Request, name: str) -> Response:
        permissions.require_staff(request, "tool_servers_partial_update")
        server = _server(name)
        body = validated_body(request, _PartialInput)
        with transaction.atomic():
            services.server_update(server, body)
        return Response(services.server_data(_server(name)))

    @extend_schema(
        operation_id="tool_servers_destroy",
        responses={200: ToolServerDeletedOut, **errors(401, 403, 404)},
        description="Delete the server: its tools are no longer offered to anyone; its stdio processes stop.",
    )
    def delete(self, request: Request, name: str) -> Response:
        permissions.require_staff(request, "tool_servers_destroy")
        with transaction.atomic():
            services.server_delete(_server(name))
        return Response({"name": name, "deleted": True})


class AgentToolsView(APIView):
    @extend_schema(
        operation_id="agents_tools",
        responses={200: AgentToolsOut, **errors(400, 401, 404)},
        parameters=[
            OpenApiParameter("scenario", str, enum=sorted(WORKING_SCENARIOS), description="default: chat"),
        ],
        description=(
            "Every tool the agent is offered in a scenario (default: chat), built-in and from its tool "
            "servers (attached to it or to its team), each with its policy (`ask`: a person approves each "
            "call), and its servers' tools that are not offered (`deny`). For who controls the agent (its "
            "owner, its team's owner, staff) a server not listed lately is listed now (started, then "
            "closed); anybody else (a teammate, the agent's own token) reads its servers' tools as last "
            "listed, and no server is started."
        ),
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_tools", agent_id)
        scenario = request.query_params.get("scenario") or CHAT
        if scenario not in WORKING_SCENARIOS:
            raise MarkusError(f"scenario must be one of {', '.join(sorted(WORKING_SCENARIOS))}")
        list_now = permissions.may(request, "tool:list_now", agent)
        return Response(services.agent_tools(agent, scenario, list_now=list_now))
