from __future__ import annotations

from django.contrib import admin
from django.urls import path

from . import views

app_name = "console"
urlpatterns = [
    path("", admin.site.admin_view(views.dashboard), name="dashboard"),
]
