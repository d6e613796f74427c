from __future__ import annotations

from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from .api import (
    ActivityLogsView,
    ChatMessagesView,
    ChatSessionsView,
    ControlView,
    DecisionsView,
    MindView,
    control_view,
)
from .chat import chat_view

urlpatterns = [
    path("api/agents/<str:agent_id>/mind", MindView.as_view()),
    path("api/agents/<str:agent_id>/decisions", DecisionsView.as_view()),
    path("api/agents/<str:agent_id>/activity-logs", ActivityLogsView.as_view()),
    path("api/agents/<str:agent_id>/chat", csrf_exempt(chat_view)),
    path("api/agents/<str:agent_id>/sessions", ChatSessionsView.as_view()),
    path("api/agents/<str:agent_id>/sessions/<str:session_id>/messages", ChatMessagesView.as_view()),
    *[path(f"api/agents/<str:agent_id>/{a}", control_view(a).as_view()) for a in ControlView.actions],
]
