"""An http tool server's name is resolved once per connection, every address it resolves
to is checked, and the connection is made to the address checked (``addresses``): a name
whose DNS answer turns from a public address to this machine's between the check and the
connection (DNS rebinding), or after a redirect, reaches nothing inside. The server is
then ``failing`` with the reason, in its row and in the API, and its calls answer a tool
error. ``MARKUS_TOOLSERVER_ALLOW_PRIVATE`` still lifts the guard.

The services "inside" are real HTTP servers on this machine that record every request;
only the resolver is replaced (no DNS in the tests)."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from rest_framework.test import APIClient

from attention.toolbox import ToolError
from markus.toolservers import addresses, offered
from markus.toolservers.models import ToolServer

pytestmark = pytest.mark.django_db

SETTING = "MARKUS_TOOLSERVER_ALLOW_PRIVATE"
NAME = "tools.example"
PUBLIC = "93.184.215.14"  # a public address (nothing is connected to here)
# Stands for a public server that can be reached in a test: 127.0.0.2 is this machine,
# counted as public by the tests that use ``outside`` (every other address as always).
OUTSIDE = "127.0.0.2"


@dataclass
class Recorder:
    """A real HTTP server on ``host``: records each request, answers ``redirect`` (307 to
    that URL, closing the connection) or 404."""

    host: str
    port: int = 0
    redirect: str = ""
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, Host
    served: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def recorder() -> Iterator[Callable[..., Recorder]]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(host: str, port: int = 0, redirect: str = "") -> Recorder:
        rec = Recorder(host, redirect=redirect)

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self) -> None:
                rec.seen.append((self.command, self.path, self.headers.get("Host", "")))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if rec.redirect:
                    self.send_response(307)
                    self.send_header("Location", rec.redirect)
                else:
                    self.send_response(404)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                rec.served.set()

            do_GET = do_POST = do_DELETE = answer

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        rec.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return rec

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def resolver(monkeypatch) -> Callable[[Callable[[int], str]], list[str]]:
    """``NAME`` resolves to what ``answer(n)`` says at its ``n``-th lookup (from 0; every
    other name as always); the addresses answered are listed, in order."""
    real = socket.getaddrinfo

    def use(answer: Callable[[int], str]) -> list[str]:
        answered: list[str] = []

        def fake(host, port, *args, **kwargs):
            if (host.decode() if isinstance(host, bytes) else host) != NAME:
                return real(host, port, *args, **kwargs)
            address = answer(len(answered))
            answered.append(address)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]

        monkeypatch.setattr(socket, "getaddrinfo", fake)
        return answered

    return use


@pytest.fixture
def outside(monkeypatch) -> None:
    """``OUTSIDE`` counts as a public address (a server the guard lets through)."""
    real = addresses._kind

    def kind(address):
        return "" if address == ipaddress.ip_address(OUTSIDE) else real(address)

    monkeypatch.setattr(addresses, "_kind", kind)


def rebinding(n: int) -> str:
    """The first lookup answers a public address, every later one 127.0.0.1."""
    return PUBLIC if n == 0 else "127.0.0.1"


def tracker(url: str) -> ToolServer:
    return ToolServer.objects.create(name="tracker", transport="http", url=url, timeout_seconds=5)


def test_a_name_that_rebinds_to_this_machine_after_the_check_reaches_nothing(recorder, resolver, stop_servers):
    inside = recorder("127.0.0.1")
    lookups = resolver(rebinding)
    server = tracker(f"http://{NAME}:{inside.port}/mcp")

    assert offered.refresh(server) == []

    assert inside.seen == [], "the connection reached the service inside"
    assert lookups[0] == PUBLIC and "127.0.0.1" in lookups
    server.refresh_from_db()
    assert server.state == "failing"
    assert f"{NAME} resolves to 127.0.0.1, a loopback address" in server.last_error and SETTING in server.last_error
    with pytest.raises(ToolError, match=SETTING):
        offered.call(server, "count", {})
    assert inside.seen == []


def test_the_refusal_shows_in_the_api(recorder, resolver, stop_servers, django_user_model):
    inside = recorder("127.0.0.1")
    resolver(rebinding)
    server = tracker(f"http://{NAME}:{inside.port}/mcp")
    offered.refresh(server)
    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_user("root", password="x", is_staff=True))
    body = staff.get("/api/tool-servers/tracker/").json()
    assert body["state"] == "failing" and "a loopback address" in body["lastError"], body
    assert inside.seen == []


def test_a_redirect_into_this_machine_is_not_followed(recorder, resolver, outside, stop_servers):
    inside = recorder("127.0.0.1")
    front = recorder(OUTSIDE, redirect=f"http://127.0.0.1:{inside.port}/mcp")
    resolver(lambda n: OUTSIDE)
    server = tracker(f"http://{NAME}:{front.port}/mcp")

    assert offered.refresh(server) == []

    assert front.seen and inside.seen == []
    server.refresh_from_db()
    assert server.state == "failing" and "127.0.0.1" in server.last_error


def test_a_redirect_after_which_the_name_rebinds_to_this_machine_reaches_nothing(
    recorder, resolver, outside, stop_servers
):
    """The front answers a redirect on its own origin and closes the connection; by the
    next connection the name resolves to 127.0.0.1, where a service listens on the same
    port. The front saw the name in ``Host`` (the address is pinned, not the header)."""
    inside = recorder("127.0.0.1")
    front = recorder(OUTSIDE, port=inside.port, redirect=f"http://{NAME}:{inside.port}/mcp/next")
    resolver(lambda n: "127.0.0.1" if front.served.is_set() else OUTSIDE)
    server = tracker(f"http://{NAME}:{inside.port}/mcp")

    assert offered.refresh(server) == []

    assert front.seen and front.seen[0][1:] == ("/mcp", f"{NAME}:{inside.port}")
    assert inside.seen == [], "the redirected request reached the service inside"
    server.refresh_from_db()
    assert server.state == "failing"
    assert f"{NAME} resolves to 127.0.0.1, a loopback address" in server.last_error


def test_the_guard_connects_to_the_address_it_checked_keeping_the_name(recorder, resolver, outside, stop_servers):
    """One lookup per connection: the address checked is the one connected to, and the
    request still names the host (``Host``)."""
    front = recorder(OUTSIDE)
    lookups = resolver(lambda n: OUTSIDE)
    server = tracker(f"http://{NAME}:{front.port}/mcp")
    offered.refresh(server)
    assert front.seen and all(host == f"{NAME}:{front.port}" for _, _, host in front.seen)
    assert set(lookups) == {OUTSIDE}


def test_the_setting_lets_a_name_reach_this_machine(recorder, resolver, allow_private, stop_servers):
    inside = recorder("127.0.0.1")
    resolver(lambda n: "127.0.0.1")
    server = tracker(f"http://{NAME}:{inside.port}/mcp")
    offered.refresh(server)
    server.refresh_from_db()
    assert inside.seen, server.last_error


def test_a_real_mcp_server_is_listed_and_called_through_the_checked_connection(local_counter, monkeypatch):
    """The SDK's whole exchange (initialize, list, call, its stream) goes through the
    checked connections; here 127.0.0.1 counts as public. (The name is not used: the
    counter server itself refuses a ``Host`` other than its address.)"""
    real = addresses._kind
    monkeypatch.setattr(addresses, "_kind", lambda a: "" if a == ipaddress.ip_address("127.0.0.1") else real(a))
    server = tracker(local_counter.url)
    assert {t["name"] for t in offered.refresh(server)} >= {"increment", "count"}
    offered.call(server, "increment", {"marker": "m"})
    assert local_counter.lines("done", "m") == 1


def test_no_proxy_from_the_environment_resolves_the_name_unchecked(
    recorder, resolver, outside, monkeypatch, stop_servers
):
    """A proxy would resolve the name itself, past the check: none is used."""
    proxy = recorder("127.0.0.1")
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    front = recorder(OUTSIDE)
    resolver(lambda n: OUTSIDE)
    offered.refresh(tracker(f"http://{NAME}:{front.port}/mcp"))
    assert proxy.seen == [] and front.seen
