"""API plumbing shared by every app: the exception handler (400 / 404 / 413, never 500
for bad input), small helpers for query parameters, and input serializers that answer
like the rest of the API (one message as ``detail``). The parsers that refuse NUL bytes
and lone surrogates are in ``markus.core.input``, the body limit in ``markus.core.limits``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from markus.core.errors import MarkusError
from markus.core.limits import BodyTooLarge, too_large


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig | BodyTooLarge):
        return Response(too_large(), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError({"detail": exc.messages})
    if isinstance(exc, MarkusError):
        return Response({"detail": str(exc)}, status=exc.status_code)
    return drf_exception_handler(exc, context)


def int_param(request: Request, name: str, default: int, *, lo: int = 0, hi: int = 1000) -> int:
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


def list_param(request: Request, name: str) -> list[str]:
    raw = request.query_params.get(name) or ""
    return [part.strip() for part in raw.split(",") if part.strip()]


# ---------------------------------------------------------------------------- input


@extend_schema_field(OpenApiTypes.STR)
class StringField(serializers.Field):
    """A string exactly as sent: blank is allowed, nothing is trimmed, and a number is
    not turned into text (anything but a string fails with the ``invalid`` message).
    Whatever else a value must be is the service's rule."""

    default_error_messages = {"invalid": "Not a valid string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class StrictIntegerField(serializers.IntegerField):
    """An integer as sent: a string, a float or a boolean fails with ``invalid``."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return data


def first_error(errors: Any) -> str:
    """The first message of a serializer's errors (fields in declaration order)."""
    if isinstance(errors, Mapping):
        values: list[Any] = list(errors.values())
    elif isinstance(errors, list | tuple):
        values = list(errors)
    else:
        return str(errors)
    return first_error(values[0]) if values else "invalid input"


def validated_body(request: Request, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    """The request body validated by ``serializer_class`` (which sees the request in its
    context). Bad input answers 400 with one message as ``detail``: "body must be a JSON
    object", or the serializer's first error, so an input serializer states its messages
    in full and declares its fields in the order they are checked."""
    data: Any = request.data
    if isinstance(data, QueryDict):
        data = data.dict()  # a form body: one value per key, read like JSON
    if not isinstance(data, dict):
        raise MarkusError("body must be a JSON object")
    serializer = serializer_class(data=data, context={"request": request})
    if not serializer.is_valid():
        raise MarkusError(first_error(serializer.errors))
    validated: dict[str, Any] = serializer.validated_data
    return validated
