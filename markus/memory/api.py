"""The long-term memory API: MEMORY.md (read as markdown and by section, replaced as
markdown) and full-text search over observations and sections. Whoever may see the agent
reads; only the agent itself (its token), its owner, its team's owner or staff write
(PUT the document, POST an observation): a teammate who may only watch gets 403."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents import permissions
from markus.core.api import StringField, int_param, validated_body
from markus.core.schema import errors

from . import search, selectors, services
from .document import DOCUMENT_LIMIT, SECTION_LIMIT, Section, document_chars, render
from .models import MemoryState, Observation

# ---------------------------------------------------------------------------- shapes


class SectionOut(serializers.Serializer):
    title = serializers.CharField()
    content = serializers.CharField()
    chars = serializers.IntegerField()
    updatedAt = serializers.DateTimeField()


class LimitsOut(serializers.Serializer):
    sectionChars = serializers.IntegerField(help_text="the most characters a section's text may have")
    documentChars = serializers.IntegerField(help_text="the most characters the whole MEMORY.md may have")


class MemoryOut(serializers.Serializer):
    agentId = serializers.CharField()
    markdown = serializers.CharField(help_text="MEMORY.md as one markdown text (## Title per section)")
    sections = SectionOut(many=True, help_text="in document order")
    chars = serializers.IntegerField(help_text="the length of markdown")
    limits = LimitsOut()
    observationCount = serializers.IntegerField()
    newObservations = serializers.IntegerField(help_text="observations no dream has consolidated yet")
    consolidatedAt = serializers.DateTimeField(allow_null=True, help_text="the last dream's consolidation")
    dreams = serializers.IntegerField(help_text="consolidations applied so far")


class MemoryIn(serializers.Serializer):
    markdown = StringField(
        help_text=f"the whole MEMORY.md: ## Title per section, each at most {SECTION_LIMIT} characters, "
        f"all at most {DOCUMENT_LIMIT} (413 over it)",
        error_messages={
            "required": "markdown is required",
            "invalid": "markdown must be a string",
            "null": "markdown must be a string",
        },
    )


class ObservationOut(serializers.Serializer):
    id = serializers.IntegerField()
    content = serializers.CharField()
    kind = serializers.CharField()
    count = serializers.IntegerField(help_text="how many saved observations were merged into this one")
    createdAt = serializers.DateTimeField()
    rank = serializers.FloatField(allow_null=True, help_text="the match's rank, higher is better; null without q")


class ObservationIn(serializers.Serializer):
    content = StringField(
        help_text=f"at most {services.OBSERVATION_LIMIT} characters",
        error_messages={
            "required": "content is required",
            "invalid": "content must be a string",
            "null": "content must be a string",
        },
    )
    kind = StringField(
        default="note",
        help_text="e.g. fact, preference, lesson (default note)",
        error_messages={"invalid": "kind must be a string", "null": "kind must be a string"},
    )


class ObservationsOut(serializers.Serializer):
    query = serializers.CharField()
    observations = ObservationOut(many=True, help_text="best match first; without q the newest first")
    totalCount = serializers.IntegerField(help_text="the agent's observations in all")


class SectionHitOut(serializers.Serializer):
    title = serializers.CharField()
    content = serializers.CharField()
    rank = serializers.FloatField()


class MemorySearchOut(serializers.Serializer):
    query = serializers.CharField()
    sections = SectionHitOut(many=True, help_text="MEMORY.md sections, best match first")
    observations = ObservationOut(many=True, help_text="observations, best match first")


Q_PARAM = OpenApiParameter("q", str, description="words to find (any of them; punctuation and operators are ignored)")
LIMIT_PARAM = OpenApiParameter("limit", int, description="1-100, default 20")

# ---------------------------------------------------------------------------- views


def memory_data(agent_id: str) -> dict[str, Any]:
    rows = list(selectors.sections(agent_id))
    doc = [Section(r.title, r.content) for r in rows]
    state = MemoryState.objects.filter(agent_id=agent_id).first()
    return {
        "agentId": agent_id,
        "markdown": render(doc),
        "sections": [
            {"title": r.title, "content": r.content, "chars": len(r.content), "updatedAt": r.updated_at} for r in rows
        ],
        "chars": document_chars(doc),
        "limits": {"sectionChars": SECTION_LIMIT, "documentChars": DOCUMENT_LIMIT},
        "observationCount": Observation.objects.filter(agent_id=agent_id).count(),
        "newObservations": selectors.new_observations(agent_id).count(),
        "consolidatedAt": state.consolidated_at if state else None,
        "dreams": state.dreams if state else 0,
    }


class MemoryView(APIView):
    @extend_schema(operation_id="agents_memory_retrieve", responses={200: MemoryOut, **errors(401, 404)})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_memory_retrieve", agent_id)
        return Response(memory_data(agent.id))

    @extend_schema(
        operation_id="agents_memory_replace",
        request=MemoryIn,
        responses={200: MemoryOut, **errors(400, 401, 403, 404, 413)},
    )
    def put(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_memory_replace", agent_id)
        body = validated_body(request, MemoryIn)
        services.document_replace(agent_id=agent.id, markdown=body["markdown"])
        return Response(memory_data(agent.id))


observation_data = selectors.observation_data


def _observations(agent_id: str, hits: list[search.Hit]) -> list[dict[str, Any]]:
    return [observation_data(o, rank) for o, rank in selectors.found_observations(agent_id, hits)]


class ObservationsView(APIView):
    @extend_schema(
        operation_id="agents_memory_observations",
        parameters=[Q_PARAM, LIMIT_PARAM],
        responses={200: ObservationsOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_memory_observations", agent_id)
        query = request.query_params.get("q") or ""
        limit = int_param(request, "limit", 20, lo=1, hi=100)
        if search.terms(query):
            found = _observations(agent.id, search.search_observations(agent.id, query, limit=limit))
        else:
            newest = Observation.objects.filter(agent_id=agent.id).order_by("-id")[:limit]
            found = [observation_data(o) for o in newest]
        total = Observation.objects.filter(agent_id=agent.id).count()
        return Response({"query": query, "observations": found, "totalCount": total})

    @extend_schema(
        operation_id="agents_memory_observations_create",
        request=ObservationIn,
        responses={201: ObservationOut, **errors(400, 401, 403, 404)},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        """Save an observation for the agent, as its memory_save tool does."""
        agent = permissions.require(request, "agents_memory_observations_create", agent_id)
        body = validated_body(request, ObservationIn)
        obs = services.memory_save(agent_id=agent.id, content=body["content"], kind=body["kind"])
        return Response(observation_data(obs), status=status.HTTP_201_CREATED)


class MemorySearchView(APIView):
    @extend_schema(
        operation_id="agents_memory_search",
        parameters=[Q_PARAM, LIMIT_PARAM],
        responses={200: MemorySearchOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_memory_search", agent_id)
        query = request.query_params.get("q") or ""
        limit = int_param(request, "limit", 20, lo=1, hi=100)
        hits = search.search_sections(agent.id, query, limit=limit)
        rows = selectors.sections(agent.id).in_bulk([h.id for h in hits])
        sections = [
            {"title": rows[h.id].title, "content": rows[h.id].content, "rank": h.rank} for h in hits if h.id in rows
        ]
        observations = _observations(agent.id, search.search_observations(agent.id, query, limit=limit))
        return Response({"query": query, "sections": sections, "observations": observations})
