from __future__ import annotations

from django.urls import path, re_path

from . import views

urlpatterns = [
    path("agents/<str:agent_id>/mind/", views.mind_view, name="mind"),
    path("agents/<str:agent_id>/mind/timeline/", views.mind_timeline, name="mind-timeline"),
    re_path(
        r"^agents/(?P<agent_id>[^/]+)/mind/(?P<action>pause|resume|wake|heartbeat)/$",
        views.mind_control,
        name="mind-control",
    ),
    re_path(
        r"^agents/(?P<agent_id>[^/]+)/mind/items/(?P<item_id>[^/]+)/(?P<action>retry|drop)/$",
        views.mind_item_control,
        name="mind-item-control",
    ),
    path(
        "agents/<str:agent_id>/mind/reminders/<str:item_id>/cancel/",
        views.mind_reminder_cancel,
        name="mind-reminder-cancel",
    ),
    re_path(
        r"^agents/(?P<agent_id>[^/]+)/reports/(?P<day>\d{4}-\d{2}-\d{2})/$", views.agent_report, name="agent-report"
    ),
    path(
        "agents/<str:agent_id>/mind/activities/<str:activity_id>/logs/",
        views.mind_activity_logs,
        name="mind-activity-logs",
    ),
]
