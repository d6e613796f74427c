from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("agents/<str:agent_id>/mind/", views.mind_view, name="mind"),
    path("agents/<str:agent_id>/mind/timeline/", views.mind_timeline, name="mind-timeline"),
    path(
        "agents/<str:agent_id>/mind/activities/<str:activity_id>/logs/",
        views.mind_activity_logs,
        name="mind-activity-logs",
    ),
]
