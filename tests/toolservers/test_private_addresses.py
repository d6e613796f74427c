"""An http tool server may not point into this machine or its networks (issue 35, point
1): a URL whose host is, or resolves to, a loopback, link-local (the cloud's metadata
service), private, unique-local, unspecified, multicast or reserved address, or names
this server itself (``ALLOWED_HOSTS``), is refused at create and update with a 400 that
says why and names ``MARKUS_TOOLSERVER_ALLOW_PRIVATE``; checked again as a worker
connects (a DNS answer may change): the server is failing and the call a tool error."""

from __future__ import annotations

import socket

import pytest
from rest_framework.test import APIClient

from attention.toolbox import ToolError
from markus.toolservers import offered
from markus.toolservers.models import ToolServer

pytestmark = pytest.mark.django_db

SETTING = "MARKUS_TOOLSERVER_ALLOW_PRIVATE"
PUBLIC = "93.184.215.14"  # a public address (nothing is connected to here)


@pytest.fixture
def staff(django_user_model) -> APIClient:
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("root", password="x", is_staff=True))
    return client


@pytest.fixture
def resolves(monkeypatch):
    """Make every name but localhost resolve to the addresses given (no DNS in the tests)."""
    real = socket.getaddrinfo

    def use(*addresses: str) -> None:
        def fake(host, port, *args, **kwargs):
            if host == "localhost":
                return real(host, port, *args, **kwargs)
            family = {4: socket.AF_INET, 6: socket.AF_INET6}
            return [(family[6 if ":" in a else 4], socket.SOCK_STREAM, 6, "", (a, port or 0)) for a in addresses]

        monkeypatch.setattr(socket, "getaddrinfo", fake)

    return use


def create(client: APIClient, url: str, name: str = "tracker"):
    return client.post("/api/tool-servers/", {"name": name, "transport": "http", "url": url}, format="json")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:9/mcp", "127.0.0.1, a loopback address"),
        ("http://[::1]:9/mcp", "::1, a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254, a link-local address"),
        ("http://10.1.2.3/mcp", "10.1.2.3, a private address"),
        ("http://[fd00::5]/mcp", "fd00::5, a private address"),
        ("http://0.0.0.0:8000/mcp", "0.0.0.0, an unspecified address"),
        ("http://224.0.0.1/mcp", "224.0.0.1, a multicast address"),
        ("http://240.0.0.1/mcp", "240.0.0.1, a reserved address"),
        ("http://[::ffff:127.0.0.1]/mcp", "::ffff:127.0.0.1, a loopback address"),
        ("http://localhost:8000/mcp", "localhost is this server's own host"),
    ],
)
def test_a_url_into_this_machine_or_its_networks_is_refused_saying_why(staff, url, why):
    r = create(staff, url)
    assert r.status_code == 400, r.content
    detail = r.json()["detail"]
    assert why in detail and SETTING in detail
    assert not ToolServer.objects.exists()


def test_a_name_of_this_server_is_refused_not_its_wildcards(staff, settings, resolves):
    settings.ALLOWED_HOSTS = ["markus.example.org", ".example.net", "*"]
    resolves(PUBLIC)
    r = create(staff, "https://markus.example.org/mcp")
    assert r.status_code == 400 and "markus.example.org is this server's own host" in r.json()["detail"]
    assert create(staff, "https://tools.example.net/mcp").status_code == 201  # a wildcard names no host


def test_a_name_that_resolves_to_a_private_address_is_refused(staff, resolves):
    resolves(PUBLIC, "10.0.0.7")
    r = create(staff, "https://tools.example/mcp")
    assert r.status_code == 400 and "tools.example resolves to 10.0.0.7, a private address" in r.json()["detail"]


def test_a_public_address_is_accepted_and_a_patch_into_the_network_refused(staff, resolves):
    resolves(PUBLIC)
    assert create(staff, "https://tools.example/mcp").status_code == 201
    r = staff.patch("/api/tool-servers/tracker/", {"url": "http://169.254.169.254/"}, format="json")
    assert r.status_code == 400 and "link-local" in r.json()["detail"]
    assert ToolServer.objects.get(name="tracker").url == "https://tools.example/mcp"
    assert staff.patch("/api/tool-servers/tracker/", {"url": f"http://{PUBLIC}/mcp"}, format="json").status_code == 200


def test_the_setting_allows_them(staff, allow_private):
    assert create(staff, "http://127.0.0.1:9/mcp").status_code == 201


def test_the_console_refuses_them_too(admin_client):
    form = {
        "name": "tracker",
        "description": "",
        "transport": "http",
        "command": "",
        "args": "[]",
        "env": "",
        "url": "http://169.254.169.254/mcp",
        "headers": "",
        "timeout_seconds": "30",
        "enabled": "on",
        "policies": "{}",
        "idempotent": "{}",
    }
    r = admin_client.post("/admin/toolservers/toolserver/add/", form)
    assert r.status_code == 200 and SETTING in r.content.decode()
    assert not ToolServer.objects.exists()


def test_a_server_whose_name_now_resolves_inside_is_failing_and_its_call_a_tool_error(resolves, stop_servers):
    resolves("127.0.0.1")  # registered while public; its DNS answer changed since
    server = ToolServer.objects.create(name="tracker", transport="http", url="http://tools.example/mcp")
    assert offered.refresh(server) == []
    server.refresh_from_db()
    assert server.state == "failing" and "127.0.0.1, a loopback address" in server.last_error
    with pytest.raises(ToolError, match=SETTING):
        offered.call(server, "count", {})
