"""WhiteNoise's static files middleware, async-capable.

``whitenoise.middleware.WhiteNoiseMiddleware`` is synchronous only: one synchronous
middleware in ``MIDDLEWARE`` makes Django run the whole chain under ASGI in a thread,
every async view through ``async_to_sync`` — a thread blocked for as long as the view
waits (a bus long-poll: up to an hour). Django's rule: an async view only runs async if
every middleware is async-capable. This one answers a static file as WhiteNoise does
(the file's lookup and opening in a thread) and hands every other request on, awaited.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None, **kwargs: Any) -> None:
        super().__init__(get_response, **kwargs)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            response: HttpResponseBase = await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
            return response
        return await self.get_response(request)
