from __future__ import annotations

from django.urls import path

from .api import RemindersView, ReminderView, ReportsView, ReportView

urlpatterns = [
    path("api/agents/<str:agent_id>/reports", ReportsView.as_view()),
    path("api/agents/<str:agent_id>/reports/<str:date>", ReportView.as_view()),
    path("api/agents/<str:agent_id>/reminders", RemindersView.as_view()),
    path("api/agents/<str:agent_id>/reminders/<str:item_id>", ReminderView.as_view()),
]
