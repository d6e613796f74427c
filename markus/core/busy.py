"""Pages and the admin: a request the database could not serve now is a 503, never a 500.

A statement of a page's request (an admin change, a settings form) that waited for a
row held by another session past the session's lock timeout, or that could not reach
the database at all (the server down or restarting), raises a database error
(``markus.core.db.retry_later`` says which); this middleware answers it with a plain 503
and Retry-After; at a door whose client is a program (``/api/``, a view outside DRF such as
an async one; the A2A door) in the API's JSON shape, as the API's exception handler
answers it (``markus.core.api``).
The view's transaction has rolled back: nothing was half done, and the same request
can be sent again."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

from markus.core.api import error_response, is_program_request
from markus.core.db import retry_later


class RetryLaterMiddleware(MiddlewareMixin):
    """``process_exception``: a lock wait given up or the database unreachable answers 503
    (plain text, Retry-After); any other exception goes on to Django's handler."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        later = retry_later(exception)
        if later is None:
            return None
        if is_program_request(request):  # a view outside DRF (an async one, A2A's): the API's shape
            return error_response(exception)
        message = later.message
        response = HttpResponse(
            f"503 Service Unavailable: {message[0].upper()}{message[1:]}.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(later.seconds)
        return response
