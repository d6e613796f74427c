"""ASGI entry point: HTTP through Django, WebSocket through Channels.

HTTP: request bodies are bounded at the edge (markus.core.limits): the ASGI middleware
around Django, and daphne's own request class, which would otherwise receive a whole
body before calling the application; an oversized request line or head answers 414 or
431 from daphne's own channel class (installed here, so ``daphne markus.asgi:application``
behind a proxy has it as ``manage.py up`` does). Django's ASGI handler is
``ParkingASGIHandler`` (markus.core.waits): a request to a view that waits (the bus
inbox wait and request, the chat) holds no thread of its own while it waits.

MCP: ``/mcp/`` is the MCP door (agentbus.mcp_door), an ASGI app of the ``mcp`` SDK's,
beside Django (it authenticates its callers by their tokens itself).

WebSockets: the origin is checked against ALLOWED_HOSTS, then the caller is the session
user or the owner of ``?token=``; each consumer decides who may connect. A database that
cannot serve now closes the socket with 4503 (``retrying_later``), as HTTP answers 503.
"""

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "markus.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from markus import telemetry  # noqa: E402

telemetry.setup()  # OTEL_* asks for traces: before Django builds its middleware chain

from markus.core.waits import ParkingASGIHandler  # noqa: E402

django_asgi_app = ParkingASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from agentbus import mcp_door  # noqa: E402
from markus.core.limits import BoundedBody, install_daphne_guard  # noqa: E402
from markus.web.consumers import MindConsumer, WorkConsumer  # noqa: E402
from notifications.consumers import (  # noqa: E402
    AgentEventsConsumer,
    NotificationsConsumer,
    TokenAuthMiddleware,
    origin_validated,
    retrying_later,
)

websocket_urlpatterns = [
    path("ws/agents/<str:agent_id>/", AgentEventsConsumer.as_asgi()),
    path("ws/agents/<str:agent_id>/mind/", MindConsumer.as_asgi()),
    path("ws/notifications/", NotificationsConsumer.as_asgi()),
    path("ws/board/", WorkConsumer.as_asgi()),
]

install_daphne_guard()


def _http(django_app: Any) -> Any:
    """``/mcp`` and below to the MCP door, everything else to Django."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if path == "/mcp" or path.startswith("/mcp/"):
            await mcp_door.asgi_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return app


application = ProtocolTypeRouter(
    {
        "http": BoundedBody(_http(django_asgi_app)),
        "websocket": origin_validated(
            retrying_later(AuthMiddlewareStack(TokenAuthMiddleware(URLRouter(websocket_urlpatterns))))
        ),
    }
)
