from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from mailbox.api import MailboxView
from markus.agents.api import AgentDetailView, AgentListView
from markus.ops import health, metrics

urlpatterns = [
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
    path("", include("attention.urls")),
    path("", include("markus.work.urls")),
    path("", include("agentbus.urls")),
    path("", include("notifications.urls")),
    path("", include("markus.web.urls")),
]
