from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from mailbox.api import MailboxView
from markus.agents.api import AgentDetailView, AgentListView, AgentTokenRotateView, AgentTokenView
from markus.agents.teams_api import TeamDetailView, TeamListView
from markus.ops import health, metrics
from markus.web import connect_pages, notification_pages, pages, work_pages
from markus.web import views as web_views

urlpatterns = [
    path("favicon.ico", web_views.favicon, name="favicon"),
    # The Claude Code hook, for curl on the machine it runs on (no secret in it).
    path("hooks/claude_code.py", connect_pages.hook_script, name="hook-claude-code"),
    path("healthz", health.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("admin/dashboard/", include("markus.console.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/agents/", AgentListView.as_view()),
    path("api/agents/<str:agent_id>/", AgentDetailView.as_view()),
    path("api/agents/<str:agent_id>/mailbox", MailboxView.as_view()),
    path("api/agents/<str:agent_id>/token", AgentTokenView.as_view()),
    path("api/agents/<str:agent_id>/token/rotate", AgentTokenRotateView.as_view()),
    path("api/teams/", TeamListView.as_view()),
    path("api/teams/<str:team_id>/", TeamDetailView.as_view()),
    path("", include("attention.urls")),
    path("", include("markus.memory.urls")),
    path("", include("markus.work.urls")),
    path("", include("agentbus.urls")),
    path("", include("notifications.urls")),
    path("", include("markus.reports.urls")),
    path("", include("markus.toolservers.urls")),
    path("", include("markus.a2a.urls")),
    path("", include("markus.usage.urls")),
    path("", include("markus.web.urls")),
    path("", pages.home, name="home"),
    path("home/agents/", pages.home_agents, name="home-agents"),
    path("home/notifications/", pages.home_notifications, name="home-notifications"),
    path("notifications/", notification_pages.notifications_page, name="notifications"),
    path("notifications/bell/", pages.bell, name="bell"),
    path("notifications/read-all/", pages.notifications_read_all, name="notifications-read-all"),
    path("notifications/<str:notification_id>/read/", pages.notification_read, name="notification-read"),
    path("notifications/<str:notification_id>/open/", pages.notification_open, name="notification-open"),
    path("agents/", pages.agents_page, name="agents"),
    # Notification links say ``/work?task=…``: with and without the slash.
    re_path(r"^work/?$", work_pages.work_page, name="work"),
]

handler404 = "markus.web.pages.page_not_found"
handler500 = "markus.web.pages.server_error"
