"""Which tool-server calls may be made again after a crash (ARCHITECTURE decision 14): a
call in flight when its worker died is made again only when the tool declares it
idempotent (``idempotentHint``). ``readOnlyHint`` makes a tool ``auto`` by default, but a
server's word that a tool only reads is no promise that a second call changes nothing.
The operator's per-tool setting (``idempotent``) decides over the hint."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.toolservers.models import Policy, ToolServer, Transport
from markus.toolservers.offered import as_tool

pytestmark = pytest.mark.django_db


def listed(**annotations: bool) -> dict:
    return {"name": "t", "inputSchema": {"type": "object", "properties": {}}, "annotations": annotations}


@pytest.fixture
def server() -> ToolServer:
    return ToolServer.objects.create(name="srv", transport=Transport.STDIO, command="true")


def test_a_read_only_tool_is_not_made_again_after_a_crash(server):
    assert as_tool(server, listed(readOnlyHint=True), Policy.AUTO).idempotent is False


def test_a_tool_that_declares_itself_idempotent_is(server):
    assert as_tool(server, listed(idempotentHint=True), Policy.AUTO).idempotent is True
    assert as_tool(server, listed(readOnlyHint=True, idempotentHint=False), Policy.AUTO).idempotent is False
    assert as_tool(server, listed(), Policy.AUTO).idempotent is False


# ------------------------------------------------ the operator's per-tool setting


def test_the_operators_setting_decides_over_the_hint(server):
    server.idempotent = {"t": True}
    assert as_tool(server, listed(), Policy.AUTO).idempotent is True
    assert as_tool(server, listed(readOnlyHint=True), Policy.ASK).idempotent is True
    server.idempotent = {"t": False}
    assert as_tool(server, listed(idempotentHint=True), Policy.AUTO).idempotent is False
    server.idempotent = {"other": True}  # another tool's: this one's hint decides
    assert as_tool(server, listed(idempotentHint=True), Policy.AUTO).idempotent is True


@pytest.fixture
def staff(django_user_model) -> APIClient:
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("root", password="x", is_staff=True))
    return client


def test_staff_set_it_per_tool_merged_like_policies_and_the_listing_shows_it(staff, server):
    ToolServer.objects.filter(pk=server.pk).update(
        tools=[{**listed(readOnlyHint=True), "name": "read"}, {**listed(idempotentHint=True), "name": "put"}]
    )
    rows = {t["name"]: t["repeatable"] for t in staff.get("/api/tool-servers/srv/").json()["tools"]}
    assert rows == {"read": False, "put": True}
    r = staff.patch("/api/tool-servers/srv/", {"idempotent": {"read": True, "put": False}}, format="json")
    assert r.status_code == 200 and r.json()["idempotent"] == {"read": True, "put": False}
    assert {t["name"]: t["repeatable"] for t in r.json()["tools"]} == {"read": True, "put": False}
    r = staff.patch("/api/tool-servers/srv/", {"idempotent": {"put": None}}, format="json")
    assert r.json()["idempotent"] == {"read": True}
    assert {t["name"]: t["repeatable"] for t in r.json()["tools"]} == {"read": True, "put": True}
    r = staff.patch("/api/tool-servers/srv/", {"idempotent": {"put": "yes"}}, format="json")
    assert r.status_code == 400 and "idempotent: 'put' must be true or false (or null)" in r.json()["detail"]
