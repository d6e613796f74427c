"""Which tool-server calls may be made again after a crash (ARCHITECTURE decision 14): a
call in flight when its worker died is made again only when the tool declares it
idempotent (``idempotentHint``). ``readOnlyHint`` makes a tool ``auto`` by default, but a
server's word that a tool only reads is no promise that a second call changes nothing."""

from __future__ import annotations

import pytest

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
