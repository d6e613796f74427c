"""The A2A door: the directory card at the site root, each agent's card and JSON-RPC
endpoint under ``/a2a/{agent_id}/`` (included at the site root, so the paths are full)."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path(".well-known/agent-card.json", views.DirectoryView.as_view(), name="a2a-directory"),
    path("a2a/<str:agent_id>/.well-known/agent-card.json", views.AgentCardView.as_view(), name="a2a-card"),
    path("a2a/<str:agent_id>/", views.rpc_view, name="a2a-rpc"),
]
