"""A server's ``lastError`` never shows a secret (issue 35, point 1): a stdio server's
last words on stderr go into its error, and a server may print its own environment.
Every env and header value of the server (of 4 characters or more) reads ``[secret]``
there, and in the tool error a call answers."""

from __future__ import annotations

import sys

import pytest

from attention.toolbox import ToolError
from markus.toolservers import offered
from markus.toolservers.models import ToolServer

pytestmark = pytest.mark.django_db

TOKEN = "tok-0123456789-very-secret"
PASSWORD = "hunter22"
# A "server" that prints its secrets to stderr and exits before it answers anything.
LEAKY = (
    "import os, sys\n"
    "sys.stderr.write('bad token ' + os.environ['API_TOKEN'] + ' for ' + os.environ['DB_PASSWORD'] + '\\n')\n"
    "sys.exit(3)\n"
)


@pytest.fixture
def leaky(stop_servers) -> ToolServer:
    return ToolServer.objects.create(
        name="leaky",
        transport="stdio",
        command=sys.executable,
        args=["-c", LEAKY],
        env={"API_TOKEN": TOKEN, "DB_PASSWORD": PASSWORD, "MODE": "dev"},
    )


def test_a_secret_the_server_printed_is_not_in_its_last_error(leaky):
    assert offered.refresh(leaky) == []
    leaky.refresh_from_db()
    assert leaky.state == "failing" and "bad token [secret] for [secret]" in leaky.last_error
    assert TOKEN not in leaky.last_error and PASSWORD not in leaky.last_error


def test_nor_in_the_tool_error_a_call_answers(leaky):
    with pytest.raises(ToolError) as caught:
        offered.call(leaky, "anything", {})
    assert TOKEN not in str(caught.value) and PASSWORD not in str(caught.value)
    leaky.refresh_from_db()
    assert TOKEN not in leaky.last_error and "[secret]" in leaky.last_error


def test_a_header_value_is_replaced_too(db):
    server = ToolServer.objects.create(
        name="tracker", transport="http", url="https://tools.example/mcp", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    offered.record_state(server, "failing", f"401 for Authorization: Bearer {TOKEN}")
    server.refresh_from_db()
    assert server.last_error == "401 for Authorization: [secret]"
