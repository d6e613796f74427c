"""API plumbing shared by every app: the exception handler (400 / 404 / 413, never 500
for bad input) and small helpers for query parameters."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from markus.core.errors import MarkusError


def exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": "Request body is too large."}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError({"detail": exc.messages})
    if isinstance(exc, MarkusError):
        return Response({"detail": str(exc)}, status=exc.status_code)
    return drf_exception_handler(exc, context)


def int_param(request, name: str, default: int, *, lo: int = 0, hi: int = 1000) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ParseError(f"{name} must be an integer") from exc
    if not lo <= value <= hi:
        raise ParseError(f"{name} must be between {lo} and {hi}")
    return value


def list_param(request, name: str) -> list[str]:
    raw = request.query_params.get(name) or ""
    return [part.strip() for part in raw.split(",") if part.strip()]
