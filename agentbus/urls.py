"""AgentBus routes, spelled as the contract spells them (no trailing slash; one is
accepted too). Included at the site root, so the paths are full."""

from __future__ import annotations

from django.urls import re_path

from . import api, async_views

AGENT = r"(?P<agent_id>[^/]+)"
STREAM = r"(?P<stream_id>[^/]+)"

urlpatterns = [
    re_path(r"^api/agentbus/streams/?$", api.StreamOpenView.as_view()),
    re_path(rf"^api/agentbus/streams/{STREAM}/append/?$", api.StreamAppendView.as_view()),
    re_path(rf"^api/agentbus/streams/{STREAM}/close/?$", api.StreamCloseView.as_view()),
    re_path(rf"^api/agentbus/streams/{STREAM}/events/?$", api.StreamEventsView.as_view()),
    re_path(r"^api/agentbus/request/?$", async_views.request_view),
    re_path(rf"^api/agents/{AGENT}/agentbus/inbox/?$", async_views.inbox_view),
    re_path(rf"^api/agents/{AGENT}/agentbus/pending/?$", api.InboxPendingView.as_view()),
    re_path(rf"^api/agents/{AGENT}/agentbus/drain/?$", api.InboxDrainView.as_view()),
]
