from django.urls import path

from .api import AgentToolsView, ToolServerDetailView, ToolServerListView

urlpatterns = [
    path("api/tool-servers/", ToolServerListView.as_view()),
    path("api/tool-servers/<str:name>/", ToolServerDetailView.as_view()),
    path("api/agents/<str:agent_id>/tools", AgentToolsView.as_view()),
]
