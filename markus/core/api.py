"""API plumbing shared by every app: the exception handler (400 / 404 / 409 / 413, never
500 for bad input; 503 with Retry-After for a lock wait given up, ``markus.core.db``;
every error in one shape, ``{"detail", "code", "fields"?}``), the same answers for
the plain async views (``error_response``, ``api_request``), small helpers for query
parameters, and input serializers that answer like the rest of the API (one
message as ``detail``). The parsers that refuse NUL bytes and lone surrogates are in
``markus.core.input``, the body limit in ``markus.core.limits``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, JsonResponse, QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from markus.core.db import retry_later
from markus.core.errors import NON_FIELD, MarkusError, fields_for
from markus.core.limits import BodyTooLarge, too_large

# The ``code`` of a MarkusError by its status (a subclass may set its own ``code``).
_CODES = {400: "invalid", 401: "not_authenticated", 403: "permission_denied", 404: "not_found", 409: "conflict"}


def error_code(exc: Exception, status_code: int) -> str:
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code:
        return code
    if isinstance(exc, APIException):
        detail_code = getattr(exc.detail, "code", None)
        return str(detail_code or exc.default_code)
    return _CODES.get(status_code, "error")


def _messages(errors: Any) -> list[str]:
    if isinstance(errors, Mapping):
        return [message for value in errors.values() for message in _messages(value)]
    if isinstance(errors, list | tuple):
        return [message for value in errors for message in _messages(value)]
    return [str(errors)]


def summary(fields: Mapping[str, Any]) -> str:
    """A readable one-line ``detail`` for a field map: ``title: This field may not be
    blank.; status: "x" is not a valid choice.`` (non-field errors without a name)."""
    parts = []
    for name, errors in fields.items():
        message = first_error(errors)
        parts.append(
            message if name in ("non_field_errors", api_settings.NON_FIELD_ERRORS_KEY) else f"{name}: {message}"
        )
    return "; ".join(parts) or "invalid input"


def error_data(exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]] | None:
    """The status, the body (``{"detail", "code", "fields"?, ...}``) and the headers of
    the answer to ``exc``, or None for an exception that is not the caller's (a 500)."""
    if isinstance(exc, RequestDataTooBig | BodyTooLarge):
        return 413, too_large(), {}
    later = retry_later(exc)  # a lock held past the lock timeout, the database unreachable
    if later is not None:
        return 503, {"detail": later.message, "code": later.code}, {"Retry-After": str(later.seconds)}
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, MarkusError):
        body = _with_extra(exc, {"detail": str(exc), "code": error_code(exc, exc.status_code)})
        wait = getattr(exc, "wait", None)  # a 429's: when to try again
        retry = {"Retry-After": f"{int(wait)}"} if wait else {}
        return exc.status_code, with_fields(exc.status_code, body, getattr(exc, "fields", None)), retry
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if not isinstance(exc, APIException):
        return None
    headers: dict[str, str] = {}
    auth_header, wait = getattr(exc, "auth_header", None), getattr(exc, "wait", None)
    if auth_header:
        headers["WWW-Authenticate"] = str(auth_header)
    if wait:
        headers["Retry-After"] = f"{int(wait)}"
    detail = exc.detail
    if isinstance(detail, Mapping):
        fields = {str(name): value for name, value in detail.items()}
        return exc.status_code, {"detail": summary(fields), "code": "invalid", "fields": fields}, headers
    if isinstance(detail, list | tuple):
        messages = _messages(detail)
        body = {"detail": " ".join(messages) or "invalid input", "code": "invalid"}
        listed: dict[str, list[str]] = {}
        for message in messages:
            for name, found in fields_for(message).items():
                listed.setdefault(name, []).extend(found)
        return exc.status_code, with_fields(exc.status_code, body, listed or None), headers
    body = _with_extra(exc, {"detail": str(detail), "code": error_code(exc, exc.status_code)})
    return exc.status_code, with_fields(exc.status_code, body), headers


def _with_extra(exc: Exception, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with what the error adds to it (its ``extra``: a 429's ``cap`` and ``limit``)."""
    extra = getattr(exc, "extra", None)
    return body | dict(extra) if isinstance(extra, Mapping) else body


def with_fields(status_code: int, body: dict[str, Any], fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one rule of bad input: a 400 always carries ``fields``, the field(s) at fault
    and their messages: ``fields`` when the refusal named them, else the field its
    message names (``markus.core.errors.fields_for``), else ``non_field_errors``."""
    if status_code != 400 or "fields" in body:
        return body
    return {**body, "fields": dict(fields) if fields else fields_for(str(body.get("detail") or "invalid input"))}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every error in one shape, ``{"detail", "code",
    "fields"?}`` (see ``error_data``); anything else is a 500, logged by Django."""
    answer = error_data(exc)
    if answer is None:
        return drf_exception_handler(exc, context)
    status_code, body, headers = answer
    set_rollback()
    return Response(body, status=status_code, headers=headers)


# The doors whose clients are programs: the API, and the A2A door (its JSON-RPC endpoints
# and cards, ``markus.a2a.urls``), which answers its other refusals (401, 404, 413, 429)
# in the API's shape too.
PROGRAM_DOORS = ("/api/", "/a2a/", "/.well-known/agent-card.json")


def is_program_request(request: HttpRequest) -> bool:
    """Is this a request to a door whose client is a program (``PROGRAM_DOORS``) and reads
    every error in the API's shape, even one no view answered (a 404, a 500, a 503)?"""
    return request.path.startswith(PROGRAM_DOORS)


def error_response(exc: Exception) -> JsonResponse:
    """The same answer for a plain (async) Django view; a 500 re-raises."""
    answer = error_data(exc)
    if answer is None:
        raise exc
    status_code, body, headers = answer
    response = JsonResponse(body, status=status_code)
    for name, value in headers.items():
        response[name] = value
    return response


def error(detail: str, status_code: int, code: str, **extra: Any) -> JsonResponse:
    """An error answer of a plain view, in the API's shape (a 400 with ``fields``)."""
    return JsonResponse(with_fields(status_code, {"detail": detail, "code": code, **extra}), status=status_code)


def api_request(request: HttpRequest) -> Request:
    """A DRF Request over a plain view's request, with the API's authenticators and
    parsers, so that authenticating it works exactly as in a DRF view: session auth's
    CSRF check reads ``request.POST``, which a Request without parsers answers with 415
    for a JSON body. The body is read first (413 over the limit), so the view can still
    read it after the check. Synchronous (``sync_to_async`` from an async view)."""
    try:
        request.body  # noqa: B018 - read and kept, for the parsers and the view alike
    except RequestDataTooBig:
        raise BodyTooLarge() from None
    # The stubs type the settings as dotted paths; api_settings imports them as classes.
    return Request(
        request,
        parsers=[cls() for cls in api_settings.DEFAULT_PARSER_CLASSES],  # type: ignore[operator]
        authenticators=[cls() for cls in api_settings.DEFAULT_AUTHENTICATION_CLASSES],  # type: ignore[operator]
    )


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


def unknown_fields(data: Mapping[str, Any], accepted: Iterable[str]) -> MarkusError | None:
    """The refusal of a body with fields the endpoint does not know (400 naming each
    and listing the accepted ones), or None. Every JSON write of the API goes through
    here (``validated_body``; the plain views call it with their own list), so a
    misspelt field (``assignee`` for ``assigneeId``) is never dropped in silence."""
    known = list(accepted)
    unknown = [str(name) for name in data if name not in known]
    if not unknown:
        return None
    listed = ", ".join(known) if known else "none (send an empty body)"
    quoted = ", ".join(repr(name) for name in unknown)
    noun = "field" if len(unknown) == 1 else "fields"
    message = f"unknown {noun} {quoted}; accepted fields: {listed}"
    return MarkusError(message, fields={name: [f"unknown field; accepted fields: {listed}"] for name in unknown})


def refuse_unknown_fields(data: Mapping[str, Any], accepted: Iterable[str]) -> None:
    """Raise ``unknown_fields``' refusal, if any."""
    refusal = unknown_fields(data, accepted)
    if refusal is not None:
        raise refusal


def _named_first_error(errors: Mapping[str, Any]) -> str:
    """The first message of a serializer's errors, naming its field unless the message
    already does (``teamId: no such team``; ``priority must be …`` as it is)."""
    for name, value in errors.items():
        message = first_error(value)
        if name in (NON_FIELD, api_settings.NON_FIELD_ERRORS_KEY) or str(name) in message:
            return message
        return f"{name}: {message}"
    return "invalid input"


def validated_body(request: Request, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    """The request body validated by ``serializer_class`` (which sees the request in its
    context). Bad input answers 400 with one message as ``detail`` and every field at
    fault in ``fields``: "body must be a JSON object", a field the serializer does not
    declare (``unknown_fields``: nested serializers decide for themselves), or the
    serializer's first error, so an input serializer states its messages in full and
    declares its fields in the order they are checked."""
    data: Any = request.data
    if isinstance(data, QueryDict):
        data = data.dict()  # a form body: one value per key, read like JSON
    if not isinstance(data, dict):
        raise MarkusError("body must be a JSON object")
    serializer = serializer_class(data=data, context={"request": request})
    refuse_unknown_fields(data, serializer.fields)
    if not serializer.is_valid():
        raise MarkusError(_named_first_error(serializer.errors), fields=serializer.errors)
    validated: dict[str, Any] = serializer.validated_data
    return validated
