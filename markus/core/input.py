"""Bad characters refused at the edge (ARCHITECTURE decision 12): NUL bytes and lone
surrogates have no place in any text Markus stores (PostgreSQL refuses both, SQLite
cannot encode a surrogate), so they answer 400 where input enters, naming where they
were, and never reach a service or the database.

- ``check_data`` walks decoded JSON (keys and values, nested) and raises
  ``UnsafeInput`` with the field path: ``payload.content: NUL bytes are not allowed``.
  It also refuses nesting deeper than ``MAX_DEPTH``, which would end in a
  RecursionError (a 500) further in.
- ``JSONParser``, ``FormParser`` and ``MultiPartParser`` (REST_FRAMEWORK
  DEFAULT_PARSER_CLASSES) apply it to every API body; ``json_body`` does the same for
  the plain async views (chat, the AgentBus request), with the 413 of a body over the
  limit.
- ``refuse_bad_characters``, a middleware, refuses them in the path (ids), in query
  parameters (names and values) and in form bodies (the pages' and the console's forms,
  whose fields reach the database through Django's forms, not a parser of ours).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponseBase, JsonResponse, QueryDict
from django.utils.decorators import sync_and_async_middleware
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from markus.core.errors import NON_FIELD, MarkusError, field_of
from markus.core.limits import BodyTooLarge

# Deeper JSON is refused: the code that stores and sends it recurses (a RecursionError
# at some hundreds of levels would be a 500); no payload of ours needs more.
MAX_DEPTH = 100
NUL = "NUL bytes are not allowed"
SURROGATE = "lone surrogates are not allowed"
_BAD = re.compile("[\x00\ud800-\udfff]")


class UnsafeInput(MarkusError):
    """A NUL byte or a lone surrogate in the input, or JSON nested too deeply: 400,
    naming where."""

    code = "parse_error"


class BodyParseError(MarkusError):
    """A body that is not valid JSON: 400, ``code: parse_error`` as DRF's ParseError."""

    code = "parse_error"


def whole_number(raw: str) -> int | None:
    """``raw`` as a whole number when it is written in ASCII digits, else None: ``"³"``
    is ``isdigit()`` but ``int()`` refuses it (a 500 where a 400 or 404 was due)."""
    return int(raw) if raw.isascii() and raw.isdigit() else None


def bad_character(text: str) -> str | None:
    """Why ``text`` is refused, or None. (A surrogate pair in JSON decodes to one
    character; only a lone surrogate survives decoding.)"""
    found = _BAD.search(text)
    if found is None:
        return None
    return NUL if found.group() == "\x00" else SURROGATE


def _shown(key: str) -> str:
    """A key fit for a message: NUL and surrogates escaped as in JSON."""
    return json.dumps(key)[1:-1]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_data(data: Any, path: str = "") -> None:
    """Raise ``UnsafeInput`` for the first string (value or key, at any depth) holding
    a NUL byte or a lone surrogate, or for nesting deeper than ``MAX_DEPTH``."""
    stack: list[tuple[str, Any, int]] = [(path, data, 0)]
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
            shown = where if len(where) <= 60 else f"{where[:60]}…"
            raise UnsafeInput(f"{shown or 'body'}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            reason = bad_character(value)
            if reason:
                raise UnsafeInput(f"{where or 'body'}: {reason}")
        elif isinstance(value, Mapping):
            children: list[tuple[str, Any, int]] = []
            for key, item in value.items():
                if isinstance(key, str):
                    reason = bad_character(key)
                    if reason:
                        raise UnsafeInput(f'{where or "body"}: {reason} (in the key "{_shown(key)}")')
                children.append((_join(where, str(key)), item, depth + 1))
            stack.extend(reversed(children))
        elif isinstance(value, list | tuple):
            stack.extend(reversed([(f"{where}[{index}]", item, depth + 1) for index, item in enumerate(value)]))


def _check_form(data: QueryDict) -> None:
    for key, values in data.lists():
        check_data({key: values[0] if len(values) == 1 else values})


def _strict_constant(value: str) -> Any:
    raise ValueError(f"{value} is not valid JSON")


def json_body(request: HttpRequest) -> Any:
    """The JSON body of a plain (non-DRF) view, checked like the API's parser; an empty
    body reads as ``{}``. Raises ``BodyTooLarge`` (413) or ``MarkusError`` (400)."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise BodyTooLarge() from None
    if not raw:
        return {}
    try:
        data = json.loads(raw, parse_constant=_strict_constant)
    except RecursionError:
        raise BodyParseError("body must be valid JSON: it is nested too deeply") from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        raise BodyParseError("body must be valid JSON") from None
    check_data(data)
    return data


# ------------------------------------------------------------------ DRF parsers


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing NUL bytes and lone surrogates (400 naming the field)
    and JSON nested too deeply to decode (a RecursionError would be a 500)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        try:
            check_data(data)
        except UnsafeInput as exc:
            raise ParseError(str(exc)) from None
        return data


class FormParser(parsers.FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        try:
            _check_form(data)
        except UnsafeInput as exc:
            raise ParseError(str(exc)) from None
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        try:
            _check_form(parsed.data)
            check_data(
                {key: [getattr(upload, "name", "") for upload in uploads] for key, uploads in parsed.files.lists()}
            )
        except UnsafeInput as exc:
            raise ParseError(str(exc)) from None
        return parsed


# ------------------------------------------------------------------ path and query


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def refusal(request: HttpRequest) -> JsonResponse | None:
    """The 400 for a NUL byte or a lone surrogate in the path, the query or a form body,
    or None. A form body is read whole first (``BoundedBody`` has kept it within the
    limit), so a view may still read it raw; Django parses ``request.POST`` from it and
    keeps it, and DRF takes it from there."""
    reason = bad_character(request.path)
    if reason:
        return _bad_request(f"path: {reason}", "path")
    for name, values in request.GET.lists():
        reason = bad_character(name)
        if reason:
            return _bad_request(f'query: {reason} (in the parameter name "{_shown(name)}")', "query")
        for value in values:
            reason = bad_character(value)
            if reason:
                return _bad_request(f"query parameter {name}: {reason}", name)
    if request.method == "POST" and request.content_type in FORM_TYPES:  # Django parses only a POST
        request.body  # noqa: B018 (read and kept: a multipart parsed from the stream could not be read again)
        try:
            _check_form(request.POST)
            check_data({name: [upload.name for upload in uploads] for name, uploads in request.FILES.lists()})
        except UnsafeInput as exc:
            return _bad_request(str(exc), field_of(str(exc)) or NON_FIELD)
    return None


def _bad_request(detail: str, field: str) -> JsonResponse:
    """The 400 in the API's shape, ``fields`` naming where (the rule of ``markus.core.api``)."""
    return JsonResponse({"detail": detail, "code": "parse_error", "fields": {field: [detail]}}, status=400)


@sync_and_async_middleware
def refuse_bad_characters(
    get_response: Callable[[HttpRequest], Any],
) -> Callable[[HttpRequest], Any]:
    """Middleware: ``refusal`` before any view (sync and async views alike)."""
    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            refused = refusal(request)
            if refused is not None:
                return refused
            response: Awaitable[HttpResponseBase] = get_response(request)
            return await response

        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponseBase:
        refused = refusal(request)
        if refused is not None:
            return refused
        response: HttpResponseBase = get_response(request)
        return response

    return middleware
