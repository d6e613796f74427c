from __future__ import annotations

from django.urls import re_path

from . import api

# The contract spells these without a trailing slash; one is accepted too.
urlpatterns = [
    re_path(r"^api/notifications/?$", api.NotificationListView.as_view()),
    re_path(r"^api/notifications/mark-all-read/?$", api.NotificationMarkAllReadView.as_view()),
    re_path(r"^api/notifications/(?P<notification_id>[^/]+)/read/?$", api.NotificationReadView.as_view()),
    re_path(r"^api/approvals/?$", api.ApprovalListView.as_view()),
    re_path(r"^api/approvals/(?P<approval_id>[^/]+)/respond/?$", api.ApprovalRespondView.as_view()),
]
