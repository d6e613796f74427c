from __future__ import annotations

from django.urls import path

from .api import MemorySearchView, MemoryView, ObservationsView

urlpatterns = [
    path("api/agents/<str:agent_id>/memory", MemoryView.as_view()),
    path("api/agents/<str:agent_id>/memory/observations", ObservationsView.as_view()),
    path("api/agents/<str:agent_id>/memory/search", MemorySearchView.as_view()),
]
