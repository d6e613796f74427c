"""Markus's URLs and one view that fails with a server error (see up_settings)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def crash(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("kaboom under manage.py up")


urlpatterns = [path("crash/", crash), path("", include("markus.urls"))]
